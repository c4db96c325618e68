//! Who may ask a worker for what: bearer tokens, each scoped to database
//! paths. A token file holds one token per line, optionally followed by
//! the path patterns (relative to the worker's root) of the databases it
//! may compact; a token without patterns may compact any database under
//! the root (the single-line file of earlier versions is such a file).
//!
//! ```text
//! # token                          databases
//! 5b0e...c1   tenants/alpha/*
//! 91fa...07   tenants/beta/db tenants/beta/archive/**
//! 0c2d...9e                        # any database under the root
//! ```
//!
//! A pattern matches path components one by one: `*` within a component
//! matches any run of characters but never a `/`, and a whole `**`
//! component matches any number of components (none included). Both modes
//! (near-data and keys-only) are authorised against the same scope, when the
//! job names its database, before any file is opened. Tokens are compared
//! in constant time; which token matched is not revealed to the caller.
//!
//! A serving worker holds its tokens in a [`TokenSet`], which the operator
//! may replace while it serves (`shale worker` does on SIGHUP): each call
//! is checked against the set current when it arrives.

use std::path::{Component, Path};
use std::sync::{Arc, PoisonError, RwLock};

use subtle::ConstantTimeEq;

/// One token and the databases it may compact.
#[derive(Clone, PartialEq, Eq)]
pub struct ScopedToken {
    /// The secret.
    pub token: String,
    /// Path patterns relative to the root; empty: every database.
    pub patterns: Vec<String>,
}

impl std::fmt::Debug for ScopedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedToken")
            .field("token", &"<set>")
            .field("patterns", &self.patterns)
            .finish()
    }
}

/// The tokens a serving worker accepts now, replaceable while it serves.
/// Empty: the worker authenticates nobody and every call may compact any
/// database under the root.
#[derive(Debug, Default)]
pub struct TokenSet {
    current: RwLock<Arc<[ScopedToken]>>,
}

impl TokenSet {
    /// A set holding `tokens`.
    pub fn new(tokens: Vec<ScopedToken>) -> TokenSet {
        TokenSet {
            current: RwLock::new(Arc::from(tokens)),
        }
    }

    /// The tokens as of now (a call keeps the list it was checked against).
    pub fn current(&self) -> Arc<[ScopedToken]> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the tokens: calls that arrive from now on are checked
    /// against `tokens`; calls already admitted keep their scope.
    pub fn replace(&self, tokens: Vec<ScopedToken>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(tokens);
    }
}

/// The scope a call was authenticated with (a request extension).
#[derive(Debug, Clone)]
pub struct Scope {
    /// Index of the token in the worker's list, for the log (never the
    /// token itself).
    pub token: usize,
    /// Patterns; empty: every database.
    pub patterns: Arc<[String]>,
}

impl Scope {
    /// A scope that allows every database (a worker without tokens).
    pub fn everything() -> Scope {
        Scope {
            token: 0,
            patterns: Arc::from(Vec::new()),
        }
    }

    /// Whether `relative` (a database path relative to the root) is in the
    /// scope.
    pub fn allows(&self, relative: &Path) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| matches(p, relative))
    }

    /// Who owns what this call stages, for the log and the ledger.
    pub fn owner(&self) -> String {
        format!("token #{}", self.token)
    }
}

/// Parses a token file: `TOKEN [PATTERN...]` per line; `#` starts a
/// comment; blank lines are skipped. Tokens must be printable ASCII without
/// spaces (a gRPC header carries them) and distinct; patterns must be
/// relative and free of `..`.
pub fn parse_token_file(text: &str) -> Result<Vec<ScopedToken>, String> {
    let mut tokens: Vec<ScopedToken> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(token) = words.next() else {
            continue;
        };
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "line {}: the token holds characters a gRPC header cannot carry",
                n + 1
            ));
        }
        if tokens.iter().any(|t| t.token == token) {
            return Err(format!("line {}: the token is listed twice", n + 1));
        }
        let patterns: Vec<String> = words.map(str::to_string).collect();
        for pattern in &patterns {
            let path = Path::new(pattern);
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| !matches!(c, Component::Normal(_)))
            {
                return Err(format!(
                    "line {}: the pattern {pattern:?} must be relative to the root, without \"..\" or \".\"",
                    n + 1
                ));
            }
        }
        tokens.push(ScopedToken {
            token: token.to_string(),
            patterns,
        });
    }
    if tokens.is_empty() {
        return Err("the token file holds no token".to_string());
    }
    Ok(tokens)
}

/// The scope of the token `given`, compared in constant time with every
/// token (all are compared, whichever matches).
pub fn authenticate(tokens: &[ScopedToken], given: &[u8]) -> Option<Scope> {
    let mut found = None;
    for (i, token) in tokens.iter().enumerate() {
        if bool::from(given.ct_eq(token.token.as_bytes())) {
            found = Some(Scope {
                token: i,
                patterns: Arc::from(token.patterns.clone()),
            });
        }
    }
    found
}

/// Whether `pattern` matches `path`, component by component.
pub fn matches(pattern: &str, path: &Path) -> bool {
    let parts: Vec<&str> = pattern
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let names: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    match_components(&parts, &names)
}

fn match_components(pattern: &[&str], names: &[&str]) -> bool {
    match pattern.split_first() {
        None => names.is_empty(),
        Some((&"**", rest)) => (0..=names.len()).any(|skip| match_components(rest, &names[skip..])),
        Some((first, rest)) => names.split_first().is_some_and(|(name, names)| {
            glob(first.as_bytes(), name.as_bytes()) && match_components(rest, names)
        }),
    }
}

/// `*` matches any run of bytes; everything else matches itself.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| glob(rest, &name[skip..])),
        Some((c, rest)) => name
            .split_first()
            .is_some_and(|(n, name)| n == c && glob(rest, name)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn patterns_match_component_by_component() {
        let yes = |p: &str, path: &str| matches(p, Path::new(path));
        assert!(yes("tenants/alpha/*", "tenants/alpha/db"));
        assert!(!yes("tenants/alpha/*", "tenants/alpha/db/deeper"));
        assert!(!yes("tenants/alpha/*", "tenants/alphabet/db"));
        assert!(yes("tenants/**", "tenants/a/b/c"));
        assert!(yes("tenants/**/db", "tenants/db"));
        assert!(yes("db-*", "db-7"));
        assert!(!yes("db-*", "other"));
        assert!(yes("a/db", "./a/db"));
    }

    #[test]
    fn a_token_file_gives_each_token_its_scope() {
        let tokens = parse_token_file(
            "# comment\nsecret-a tenants/alpha/*\n\nsecret-b b/db c/**  # two\nsecret-all\n",
        )
        .unwrap();
        assert_eq!(tokens.len(), 3);
        let a = authenticate(&tokens, b"secret-a").unwrap();
        assert!(a.allows(Path::new("tenants/alpha/db")));
        assert!(!a.allows(Path::new("b/db")));
        let b = authenticate(&tokens, b"secret-b").unwrap();
        assert!(b.allows(Path::new("c/x/y")) && b.allows(Path::new("b/db")));
        assert!(authenticate(&tokens, b"secret-all")
            .unwrap()
            .allows(Path::new("anything")));
        assert!(authenticate(&tokens, b"secret").is_none());
        assert!(authenticate(&tokens, b"").is_none());
        // The single line of earlier versions: one token, every database.
        assert_eq!(parse_token_file("abc\n").unwrap()[0].patterns.len(), 0);
        assert!(parse_token_file("").unwrap_err().contains("no token"));
        assert!(parse_token_file("t ../x").unwrap_err().contains(".."));
        assert!(parse_token_file("t /abs").unwrap_err().contains("relative"));
        assert!(parse_token_file("t a\nt b").unwrap_err().contains("twice"));
    }

    #[test]
    fn a_token_set_checks_against_what_it_holds_now() {
        let set = TokenSet::new(parse_token_file("old\n").unwrap());
        assert!(authenticate(&set.current(), b"old").is_some());
        let before = set.current();
        set.replace(parse_token_file("new db/*\n").unwrap());
        assert!(authenticate(&set.current(), b"old").is_none());
        let new = authenticate(&set.current(), b"new").unwrap();
        assert!(new.allows(Path::new("db/x")) && !new.allows(Path::new("other")));
        // A list taken before the swap is unchanged.
        assert!(authenticate(&before, b"old").is_some());
    }
}
