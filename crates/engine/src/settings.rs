//! Cache settings: python-diskcache's `DEFAULT_SETTINGS`, same names, same defaults, persisted
//! in the directory's `settings` table.

use crate::{Error, Result};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionPolicy {
    LeastRecentlyStored,
    LeastRecentlyUsed,
    LeastFrequentlyUsed,
    None,
}

impl EvictionPolicy {
    pub const ALL: [EvictionPolicy; 4] = [
        EvictionPolicy::LeastRecentlyStored,
        EvictionPolicy::LeastRecentlyUsed,
        EvictionPolicy::LeastFrequentlyUsed,
        EvictionPolicy::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::LeastRecentlyStored => "least-recently-stored",
            EvictionPolicy::LeastRecentlyUsed => "least-recently-used",
            EvictionPolicy::LeastFrequentlyUsed => "least-frequently-used",
            EvictionPolicy::None => "none",
        }
    }

    pub fn parse(name: &str) -> Result<EvictionPolicy> {
        EvictionPolicy::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                Error::Setting(format!(
                "eviction_policy: unknown policy {name:?}; use one of 'least-recently-stored', \
                 'least-recently-used', 'least-frequently-used' or 'none'"
            ))
            })
    }
}

/// A setting's value as persisted: SQLite integer or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingValue {
    Int(i64),
    Str(String),
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingValue::Int(i) => write!(f, "{i}"),
            SettingValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for SettingValue {
    fn from(i: i64) -> Self {
        SettingValue::Int(i)
    }
}

impl From<&str> for SettingValue {
    fn from(s: &str) -> Self {
        SettingValue::Str(s.to_owned())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub statistics: bool,
    pub tag_index: bool,
    pub eviction_policy: EvictionPolicy,
    pub size_limit: i64,
    pub cull_limit: i64,
    pub sqlite_auto_vacuum: i64,
    pub sqlite_cache_size: i64,
    pub sqlite_journal_mode: String,
    pub sqlite_mmap_size: i64,
    pub sqlite_synchronous: i64,
    pub disk_min_file_size: i64,
    /// Used only by pickling handles; kept so the directory remembers it as python-diskcache's does.
    pub disk_pickle_protocol: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            statistics: false,
            tag_index: false,
            eviction_policy: EvictionPolicy::LeastRecentlyStored,
            size_limit: 1 << 30,
            cull_limit: 10,
            sqlite_auto_vacuum: 1,
            sqlite_cache_size: 1 << 13,
            sqlite_journal_mode: "wal".into(),
            sqlite_mmap_size: 1 << 26,
            sqlite_synchronous: 1,
            disk_min_file_size: 1 << 15,
            disk_pickle_protocol: 5,
        }
    }
}

/// Every setting name, in python-diskcache's order.
pub const SETTING_NAMES: [&str; 12] = [
    "statistics",
    "tag_index",
    "eviction_policy",
    "size_limit",
    "cull_limit",
    "sqlite_auto_vacuum",
    "sqlite_cache_size",
    "sqlite_journal_mode",
    "sqlite_mmap_size",
    "sqlite_synchronous",
    "disk_min_file_size",
    "disk_pickle_protocol",
];

impl Settings {
    pub fn get(&self, name: &str) -> Result<SettingValue> {
        use SettingValue::{Int, Str};
        Ok(match name {
            "statistics" => Int(self.statistics as i64),
            "tag_index" => Int(self.tag_index as i64),
            "eviction_policy" => Str(self.eviction_policy.name().into()),
            "size_limit" => Int(self.size_limit),
            "cull_limit" => Int(self.cull_limit),
            "sqlite_auto_vacuum" => Int(self.sqlite_auto_vacuum),
            "sqlite_cache_size" => Int(self.sqlite_cache_size),
            "sqlite_journal_mode" => Str(self.sqlite_journal_mode.clone()),
            "sqlite_mmap_size" => Int(self.sqlite_mmap_size),
            "sqlite_synchronous" => Int(self.sqlite_synchronous),
            "disk_min_file_size" => Int(self.disk_min_file_size),
            "disk_pickle_protocol" => Int(self.disk_pickle_protocol),
            _ => return Err(unknown(name)),
        })
    }

    /// Validate and apply one setting.
    pub fn set(&mut self, name: &str, value: &SettingValue) -> Result<()> {
        match name {
            "statistics" => self.statistics = int(name, value, 0, 1)? != 0,
            "tag_index" => self.tag_index = int(name, value, 0, 1)? != 0,
            "eviction_policy" => match value {
                SettingValue::Str(s) => self.eviction_policy = EvictionPolicy::parse(s)?,
                SettingValue::Int(_) => {
                    return Err(Error::Setting(
                        "eviction_policy: expected a policy name (str)".into(),
                    ))
                }
            },
            "size_limit" => self.size_limit = int(name, value, 0, i64::MAX)?,
            "cull_limit" => self.cull_limit = int(name, value, 0, i64::MAX)?,
            "sqlite_auto_vacuum" => self.sqlite_auto_vacuum = int(name, value, 0, 2)?,
            "sqlite_cache_size" => self.sqlite_cache_size = int(name, value, i64::MIN, i64::MAX)?,
            "sqlite_journal_mode" => match value {
                SettingValue::Str(s) if s.eq_ignore_ascii_case("wal") => {
                    self.sqlite_journal_mode = "wal".into()
                }
                _ => {
                    return Err(Error::Setting(format!(
                        "sqlite_journal_mode: only 'wal' is supported (got {value}); concurrent \
                         readers and writers across processes depend on it"
                    )))
                }
            },
            "sqlite_mmap_size" => self.sqlite_mmap_size = int(name, value, 0, i64::MAX)?,
            "sqlite_synchronous" => self.sqlite_synchronous = int(name, value, 0, 3)?,
            "disk_min_file_size" => self.disk_min_file_size = int(name, value, 0, i64::MAX)?,
            "disk_pickle_protocol" => self.disk_pickle_protocol = int(name, value, 0, 5)?,
            _ => return Err(unknown(name)),
        }
        Ok(())
    }
}

fn unknown(name: &str) -> Error {
    Error::Setting(format!(
        "unknown setting {name:?}; the settings are: {}",
        SETTING_NAMES.join(", ")
    ))
}

fn int(name: &str, value: &SettingValue, lo: i64, hi: i64) -> Result<i64> {
    match value {
        SettingValue::Int(i) if (lo..=hi).contains(i) => Ok(*i),
        SettingValue::Int(i) => Err(Error::Setting(format!(
            "{name}: {i} is out of range {lo}..={hi}"
        ))),
        SettingValue::Str(s) => Err(Error::Setting(format!(
            "{name}: expected an int, got the string {s:?}"
        ))),
    }
}
