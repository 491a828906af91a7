//! The safe value format (D-002): round trips, canonical keys, and a decoder that refuses bad input
//! without panicking.
//!
//! One test binary, split by concept:
//! - `support`: shared helpers (bit-exact equality, key order, integer references, hex, dates);
//! - `strategies`: proptest generators for values within the ranges Python can construct;
//! - `properties`: the proptest properties (round trips, canonical keys, fuzzing the decoder);
//! - `known_encodings`: fixed byte vectors, our tags, integer and float forms, key order;
//! - `refusals`: what the decoder rejects, and with which message.

mod known_encodings;
mod properties;
mod refusals;
mod strategies;
mod support;
