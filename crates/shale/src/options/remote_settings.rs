//! The `remote` executor's settings, one field of [`Options`]
//! ([`Options::remote`]).

use std::path::PathBuf;
use std::time::Duration;

use shale_compact::remote::RemoteMode;

#[cfg(doc)]
use super::Options;

/// The `remote` executor's settings: the compaction workers (`shale
/// worker`) it ships jobs to, how it authenticates to them and what
/// crosses the wire. With no workers (the default) the database has no
/// `remote` executor.
///
/// The C API's setters, Python's keyword arguments and the command line's
/// flags that set a field keep a flat name: `remote_` and the field's name
/// (`remote_workers`, `remote_mode`, ...; on the command line the token is
/// `--remote_token_file`, the identity `--remote_tls_cert` and
/// `--remote_tls_key`).
///
/// ```
/// use std::time::Duration;
/// use shale::options::RemoteToken;
/// use shale::shale_compact::remote::RemoteMode;
/// use shale::{Options, RemoteSettings};
/// let options = Options {
///     remote: RemoteSettings {
///         workers: vec!["http://10.0.0.7:7070".to_string()],
///         token: Some(RemoteToken("the worker's token".to_string())),
///         mode: RemoteMode::KeysOnly,
///         timeout: Duration::from_secs(10),
///         ..RemoteSettings::default()
///     },
///     ..Options::default()
/// };
/// assert!(options.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSettings {
    /// Compaction workers (`shale worker`) the `remote` executor ships jobs
    /// to: `http://HOST:PORT`, `https://HOST:PORT` or `HOST:PORT`. Empty
    /// (the default): none. With workers and `compaction_executor=auto`,
    /// each worker gets a compaction thread of its own that offers its jobs
    /// to the workers first; a job a worker cannot finish runs locally.
    pub workers: Vec<String>,
    /// The token sent to the workers with every call (the contents of the
    /// worker's `--token_file`); `None`: none.
    pub token: Option<RemoteToken>,
    /// What crosses the wire: `near-data` (the default: the worker runs the
    /// whole job beside the data) or `keys-only` (the worker sends keys, the
    /// engine merges them, the worker packs the values).
    pub mode: RemoteMode,
    /// Keys-only mode: the most keys of one input run the engine holds or
    /// has asked a worker for and not yet merged (default 4096, at least
    /// 1). The engine's memory for a keys-only job, and the worker's, is
    /// this many keys per input run, whatever the job's size.
    pub keys_window: u64,
    /// A worker that sends neither progress nor a result for this long
    /// loses its job to a local executor (default 30 s).
    pub timeout: Duration,
    /// The CA certificate (PEM file) `https://` workers are checked
    /// against; `None`: the system's trust store.
    pub tls_ca: Option<PathBuf>,
    /// The engine's certificate chain and private key (PEM files), for
    /// workers that require client certificates (mutual TLS); both or
    /// neither.
    pub tls_identity: Option<(PathBuf, PathBuf)>,
}

impl Default for RemoteSettings {
    fn default() -> RemoteSettings {
        RemoteSettings {
            workers: Vec::new(),
            token: None,
            mode: RemoteMode::default(),
            keys_window: shale_compact::remote::DEFAULT_KEYS_WINDOW,
            timeout: Duration::from_secs(30),
            tls_ca: None,
            tls_identity: None,
        }
    }
}

/// A secret that `Debug` does not print.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteToken(pub String);

impl std::fmt::Debug for RemoteToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteToken(<hidden>)")
    }
}
