//! The proptest properties: `encode` and `encode_key` round trips, keys independent of set and
//! dict order, one form per integer, and a decoder that never panics on random, CBOR-like,
//! mutated or truncated bytes.

use crate::strategies::{arb_cbor_ish, arb_value};
use crate::support::{int128, int_from_bytes, key_order, permute, reference_int_encoding, same};
use diskcache_oxide_engine::value::{decode, encode, encode_key, Value};
use proptest::collection::vec;
use proptest::prelude::*;

proptest! {
    // 512 cases by default; PROPTEST_CASES=100000 for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn encode_round_trips(v in arb_value()) {
        let bytes = encode(&v);
        let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}: {bytes:02x?}")))?;
        prop_assert!(same(&back, &v), "{v:?}\n -> {back:?}");
    }

    #[test]
    fn encode_key_round_trips_up_to_order(v in arb_value()) {
        let bytes = encode_key(&v);
        let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}: {bytes:02x?}")))?;
        prop_assert!(same(&key_order(&back), &key_order(&v)), "{v:?}\n -> {back:?}");
        prop_assert_eq!(encode_key(&back), bytes.clone(), "not idempotent");
        // The two encoders differ in order only.
        prop_assert_eq!(encode(&v).len(), bytes.len());
        prop_assert_eq!(encode(&key_order(&v)), bytes);
    }

    #[test]
    fn encode_key_ignores_set_and_dict_order(v in arb_value(), seed in 1u64..) {
        let mut seed = seed;
        prop_assert_eq!(encode_key(&permute(&v, &mut seed)), encode_key(&v));
    }

    #[test]
    fn encode_key_ignores_shuffled_elements(
        (items, shuffled) in vec(arb_value(), 0..8).prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        prop_assert_eq!(encode_key(&Value::Set(shuffled.clone())), encode_key(&Value::Set(items.clone())));
        prop_assert_eq!(
            encode_key(&Value::FrozenSet(shuffled.clone())),
            encode_key(&Value::FrozenSet(items.clone()))
        );
        let pairs = |v: &[Value]| Value::Dict(v.iter().map(|k| (k.clone(), Value::Int(0))).collect());
        prop_assert_eq!(encode_key(&pairs(&shuffled)), encode_key(&pairs(&items)));
    }

    #[test]
    fn integers_have_one_form_and_one_encoding(n in any::<i128>(), pad in 0usize..4) {
        let v = int128(n);
        let bytes = encode(&v);
        prop_assert_eq!(&bytes, &reference_int_encoding(n));
        prop_assert_eq!(decode(&bytes).unwrap(), v);
        // Redundant sign bytes change nothing.
        let sign = if n < 0 { 0xff } else { 0x00 };
        let padded = [vec![sign; pad], n.to_be_bytes().to_vec()].concat();
        prop_assert_eq!(encode(&Value::BigInt(padded)), bytes);
    }

    #[test]
    fn wide_integers_round_trip(b in vec(any::<u8>(), 1..80)) {
        let v = int_from_bytes(&b);
        prop_assert_eq!(decode(&encode(&v)).unwrap(), v);
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn cbor_like_bytes_never_panic(bytes in arb_cbor_ish()) {
        if let Ok(v) = decode(&bytes) {
            // Whatever is accepted is valid: it encodes and reads back as itself.
            prop_assert!(same(&decode(&encode(&v)).unwrap(), &v));
        }
    }

    #[test]
    fn mutated_encodings_never_panic(
        v in arb_value(),
        edits in vec((any::<prop::sample::Index>(), 1u8.., 0u8..3), 1..4),
    ) {
        let mut bytes = encode(&v);
        for (at, byte, op) in edits {
            match op {
                0 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] ^= byte;
                }
                1 => bytes.truncate(at.index(bytes.len() + 1)),
                _ => bytes.insert(at.index(bytes.len() + 1), byte),
            }
        }
        if let Ok(v) = decode(&bytes) {
            prop_assert!(same(&decode(&encode(&v)).unwrap(), &v));
        }
    }

    #[test]
    fn truncations_are_errors(v in arb_value(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&v);
        let cut = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..cut]).is_err());
    }
}
