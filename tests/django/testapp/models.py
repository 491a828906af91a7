"""The model the tests cache instances of."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Poll(models.Model):
    """A question and when it was asked."""

    question = models.CharField(max_length=200)
    asked = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "testapp"
