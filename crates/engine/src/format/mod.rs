//! Formats (D-050): how values and keys become bytes and back. Pure computation over bytes:
//! nothing here touches a file or a database.
//!
//! | module | what |
//! |---|---|
//! | [`value`] | the safe value format, its CBOR encoding and previews (D-002) |
//! | `kind` | the `kind` column: how a payload's bytes are read |
//! | `key` | keys and their stored forms |
//! | `stored` | values as written and read back, with their checksum |
//! | [`frame`] | one value or key as a self-describing byte string, for stores without columns (D-058) |

pub mod frame;
pub(crate) mod key;
pub(crate) mod kind;
pub(crate) mod stored;
pub mod value;
