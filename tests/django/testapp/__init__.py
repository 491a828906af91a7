"""A Django app with one model, so that caching model instances can be tested."""
