//! `[auth]`, `[bridge]` and `[tls]`: keys that authenticate upstream packets
//! (docs/upstream.md, "Authentication"), the bridge that joins this site to a bus at another
//! one, and TLS on the SoupBinTCP links between sites (docs/sites.md). Keys are read when the
//! configuration is parsed and never shown: neither `Debug` nor an error repeats them.

use std::net::SocketAddr;
use std::path::PathBuf;

use seqbus_wire::auth::{Key, KEY_LEN, MAC_LEN};
use seqbus_wire::Account;
use serde::Deserialize;

use crate::{Config, Transport};

/// `[auth]`: every account that may send, with its key.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    pub accounts: Vec<AccountKeyConfig>,
    /// The keys, read from `key` or `key_file` when parsed.
    #[serde(skip)]
    pub keys: Vec<(Account, Key)>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("accounts", &self.accounts)
            .finish_non_exhaustive()
    }
}

/// One account's key: 64 hexadecimal digits in `key`, or a file holding them (or the 32 raw
/// bytes) in `key_file`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountKeyConfig {
    pub account: String,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

impl std::fmt::Debug for AccountKeyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AccountKeyConfig({:?}, <hidden>)", self.account)
    }
}

/// `[bridge]`: the end of a bridge at this site (`seqbus bridge`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// SoupBinTCP servers of replayers at the other site (their `replayer.tcp_listen`), one
    /// connection each: redundant channels, the first copy of each message wins.
    pub channels: Vec<SocketAddr>,
    /// The bridge's own journal: what it logs in from, and serves this site's rewinds from.
    pub journal_dir: PathBuf,
}

/// `[tls]`: TLS on the SoupBinTCP links of replayers and bridges.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain and private key of this site's `replayer.tcp_listen` server:
    /// with them it speaks TLS only.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// PEM certificates the links this site opens (`bridge.channels`,
    /// `replayer.follow_tcp`) trust: with it they speak TLS only.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// The name the servers' certificates must carry (default: the address's IP).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// Checks that need no file.
pub(crate) fn check(cfg: &Config) -> Result<(), (&'static str, String)> {
    if let Some(a) = &cfg.auth {
        if a.accounts.is_empty() {
            return Err((
                "auth.accounts",
                "at least one account (without [auth], upstream is not authenticated)".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for k in &a.accounts {
            seqbus_wire::account(&k.account).map_err(|m| ("auth.accounts", m))?;
            if !seen.insert(k.account.as_str()) {
                return Err((
                    "auth.accounts",
                    format!("account {:?} is listed twice", k.account),
                ));
            }
            if k.key.is_some() == k.key_file.is_some() {
                return Err((
                    "auth.accounts",
                    format!("account {:?}: give either key or key_file", k.account),
                ));
            }
        }
        // a command packet must hold a fragment beside header, block header and trailer
        if cfg.bus.max_packet < 28 + 16 + seqbus_wire::auth::TRAILER_LEN + 64 + cfg.mold_trailer() {
            return Err((
                "bus.max_packet",
                format!(
                    "must be at least {} with [auth] (room for the MAC)",
                    140 + cfg.mold_trailer()
                ),
            ));
        }
    }
    let d = &cfg.downstream;
    if d.key.is_some() && d.key_file.is_some() {
        return Err(("downstream.key", "give either key or key_file".into()));
    }
    if d.key.is_some() || d.key_file.is_some() {
        // a packet must hold a block of 64 bytes beside header and MAC
        let least = seqbus_wire::mold::MOLD_HEADER_LEN + 2 + 64 + MAC_LEN;
        for (name, v) in [
            ("bus.max_packet", cfg.bus.max_packet),
            ("replayer.max_packet", cfg.replayer.max_packet),
        ] {
            if v < least {
                return Err((
                    name,
                    format!("must be at least {least} with downstream.key (room for the MAC)"),
                ));
            }
        }
    }
    let r = &cfg.replayer;
    if r.follow_listen.is_some() && !r.follow {
        return Err((
            "replayer.follow_listen",
            "only a following replayer (replayer.follow = true) receives the stream".into(),
        ));
    }
    let unicast = cfg.downstream.transport == crate::Transport::UdpUnicast;
    if r.follow
        && unicast
        && r.follow_tcp.is_empty()
        && r.follow_listen.is_none()
        && cfg.node.listen.is_none()
    {
        return Err((
            "replayer.follow_listen",
            "a following replayer on a udp-unicast downstream receives it here (one of \
             downstream.subscribers): required without node.listen"
                .into(),
        ));
    }
    if let Some(a) = r.follow_listen {
        let down = &cfg.downstream;
        if unicast && !down.subscribers.contains(&a) {
            return Err((
                "replayer.follow_listen",
                format!(
                    "{a} is not one of downstream.subscribers: the sequencer would not send to it"
                ),
            ));
        }
    }
    if !r.follow_tcp.is_empty() && !r.follow {
        return Err((
            "replayer.follow_tcp",
            "only a following replayer (replayer.follow = true) reads other replayers".into(),
        ));
    }
    if let Some(b) = &cfg.bridge {
        if b.channels.is_empty() {
            return Err((
                "bridge.channels",
                "at least one replayer to connect to".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(a) = b.channels.iter().find(|a| !seen.insert(**a)) {
            return Err(("bridge.channels", format!("{a} is listed twice")));
        }
        if !matches!(
            cfg.downstream.transport,
            Transport::UdpMulticast | Transport::UdpUnicast
        ) {
            return Err((
                "downstream.transport",
                "a bridge republishes the stream over udp-multicast or udp-unicast".into(),
            ));
        }
        if cfg.cluster.is_some() {
            return Err((
                "bridge",
                "a site joined by a bridge has no sequencer of its own: remove [cluster]".into(),
            ));
        }
    }
    if let Some(t) = &cfg.tls {
        if t.cert.is_some() != t.key.is_some() {
            return Err(("tls.cert", "cert and key go together".into()));
        }
        if t.cert.is_none() && t.ca.is_none() {
            return Err((
                "tls",
                "give cert and key (a TLS server) or ca (TLS links to servers)".into(),
            ));
        }
    }
    Ok(())
}

/// Reads the keys and resolves the paths of `[auth]` and `[tls]` (relative to the file).
pub(crate) fn resolve(cfg: &mut Config) -> Result<(), (&'static str, String)> {
    let base = cfg.base_dir.clone();
    if let Some(t) = cfg.tls.as_mut() {
        for (key, path) in [
            ("tls.cert", &mut t.cert),
            ("tls.key", &mut t.key),
            ("tls.ca", &mut t.ca),
        ] {
            if let Some(p) = path.as_mut() {
                *p = base.join(&*p);
                if !p.is_file() {
                    return Err((key, format!("{}: no such file", p.display())));
                }
            }
        }
    }
    if let Some(b) = cfg.bridge.as_mut() {
        b.journal_dir = base.join(&b.journal_dir);
    }
    let d = &mut cfg.downstream;
    d.signing = match (&d.key, &d.key_file) {
        (Some(hex), _) => Some(Key::from_hex(hex).map_err(|m| ("downstream.key", m))?),
        (None, Some(file)) => {
            let path = base.join(file);
            Some(read_key(&path).map_err(|m| ("downstream.key_file", m))?)
        }
        (None, None) => None,
    };
    let Some(a) = cfg.auth.as_mut() else {
        return Ok(());
    };
    let mut keys = Vec::new();
    for k in &a.accounts {
        let account = seqbus_wire::account(&k.account).expect("checked");
        let key = match (&k.key, &k.key_file) {
            (Some(hex), _) => Key::from_hex(hex).map_err(|m| {
                (
                    "auth.accounts",
                    format!("account {:?}: key: {m}", k.account),
                )
            })?,
            (None, Some(file)) => read_key(&base.join(file)).map_err(|m| {
                (
                    "auth.accounts",
                    format!("account {:?}: key_file {m}", k.account),
                )
            })?,
            (None, None) => unreachable!("checked"),
        };
        keys.push((account, key));
    }
    a.keys = keys;
    Ok(())
}

/// A key file: 64 hexadecimal digits, or the 32 raw bytes. The error starts with the path and
/// never repeats the file's text.
fn read_key(path: &std::path::Path) -> Result<Key, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match <[u8; KEY_LEN]>::try_from(bytes.as_slice()) {
        Ok(raw) if std::str::from_utf8(&bytes).is_err() => Ok(Key::new(raw)),
        _ => Key::from_hex(&String::from_utf8_lossy(&bytes))
            .map_err(|m| format!("{}: {m}", path.display())),
    }
}

impl Config {
    /// The bus's downstream key (`downstream.key` / `key_file`), when it has one.
    pub fn downstream_key(&self) -> Option<&Key> {
        self.downstream.signing.as_ref()
    }

    /// Bytes every MoldUDP64 datagram carries after its packet: the MAC with a downstream
    /// key, else none.
    pub fn mold_trailer(&self) -> usize {
        if self.downstream.key.is_some() || self.downstream.key_file.is_some() {
            MAC_LEN
        } else {
            0
        }
    }

    /// Largest MoldUDP64 packet of the stream (before its MAC): `bus.max_packet` less the
    /// trailer.
    pub fn mold_max_packet(&self) -> usize {
        self.bus.max_packet - self.mold_trailer()
    }

    /// Largest MoldUDP64 packet of a replayer's answer (before its MAC).
    pub fn replay_max_packet(&self) -> usize {
        self.replayer.max_packet - self.mold_trailer()
    }

    /// The key of `account` (1–8 characters), when `[auth]` names it.
    pub fn account_key(&self, account: &str) -> Option<Key> {
        let a = seqbus_wire::account(account).ok()?;
        self.auth
            .as_ref()?
            .keys
            .iter()
            .find(|(x, _)| *x == a)
            .map(|(_, k)| k.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    const BASE: &str = "[bus]\nsession = \"T\"\n[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.1.1.1:5000\"\n";
    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn err(text: &str) -> String {
        Config::from_str(&format!("{BASE}{text}"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_downstream_key_is_read_named_when_bad_and_never_shown() {
        let plain = Config::from_str(BASE).unwrap();
        assert!(plain.downstream_key().is_none());
        assert_eq!((plain.mold_trailer(), plain.mold_max_packet()), (0, 1472));
        let c = Config::from_str(&format!("{BASE}key = \"{HEX}\"\n")).unwrap();
        assert!(c.downstream_key().is_some());
        assert_eq!(c.mold_max_packet(), 1472 - 16);
        assert_eq!(c.replay_max_packet(), c.replayer.max_packet - 16);
        let shown = format!("{c:?}");
        assert!(!shown.contains("0001020304"), "{shown}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("down.key"), [0xf7u8; 32]).unwrap();
        let p = dir.path().join("bus.toml");
        std::fs::write(&p, format!("{BASE}key_file = \"down.key\"\n")).unwrap();
        let f = Config::from_path(&p).unwrap();
        assert_eq!(
            f.downstream_key(),
            Some(&seqbus_wire::auth::Key::new([0xf7; 32]))
        );
        let e = Config::from_str(&format!("{BASE}key = \"secretsecret\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("<string>: downstream.key: a key is 32 bytes"),
            "{e}"
        );
        assert!(!e.contains("secretsecret"), "{e}");
        let e = Config::from_str(&format!("{BASE}key_file = \"/nonexistent/down.key\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("<string>: downstream.key_file: /nonexistent/down.key:"),
            "{e}"
        );
        let e = Config::from_str(&format!("{BASE}key = \"{HEX}\"\nkey_file = \"x\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("downstream.key: give either key or key_file"),
            "{e}"
        );
        let e = Config::from_str(&format!(
            "{BASE}key = \"{HEX}\"\n[replayer]\nmax_packet = 90\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("replayer.max_packet: must be at least 102 with downstream.key"),
            "{e}"
        );
    }

    #[test]
    fn keys_from_hex_and_files_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gw.key"), format!("{HEX}\n")).unwrap();
        std::fs::write(dir.path().join("raw.key"), [0xffu8; 32]).unwrap();
        let p = dir.path().join("bus.toml");
        std::fs::write(
            &p,
            format!(
                "{BASE}[auth]\naccounts = [{{ account = \"ME\", key = \"{HEX}\" }}, {{ account = \"GW\", key_file = \"gw.key\" }}, {{ account = \"R\", key_file = \"raw.key\" }}]\n"
            ),
        )
        .unwrap();
        let c = Config::from_path(&p).unwrap();
        assert_eq!(c.account_key("ME"), c.account_key("GW"));
        assert!(c.account_key("ME").is_some());
        assert_ne!(c.account_key("R"), c.account_key("ME"));
        assert!(c.account_key("NOBODY").is_none());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains(HEX) && !shown.contains("0001020304"),
            "{shown}"
        );
    }

    #[test]
    fn bad_keys_are_named_without_their_text() {
        let e = err("[auth]\naccounts = [{ account = \"ME\", key = \"secretsecret\" }]\n");
        assert!(
            e.starts_with("<string>: auth.accounts: account \"ME\": key:"),
            "{e}"
        );
        assert!(!e.contains("secretsecret"), "{e}");
        let e = err(&format!(
            "[auth]\naccounts = [{{ account = \"ME\", key = \"{HEX}\", key_file = \"x\" }}]\n"
        ));
        assert!(e.contains("either key or key_file"), "{e}");
        let e =
            err("[auth]\naccounts = [{ account = \"ME\", key_file = \"/nonexistent/me.key\" }]\n");
        assert!(e.contains("key_file /nonexistent/me.key"), "{e}");
        let e = err(&format!(
            "[auth]\naccounts = [{{ account = \"ME\", key = \"{HEX}\" }}, {{ account = \"ME\", key = \"{HEX}\" }}]\n"
        ));
        assert!(e.contains("listed twice"), "{e}");
        let e = err("[auth]\naccounts = []\n");
        assert!(
            e.starts_with("<string>: auth.accounts: at least one"),
            "{e}"
        );
    }

    #[test]
    fn bridges_tiers_and_tls_are_checked() {
        let ok = Config::from_str(&format!(
            "{BASE}[bridge]\nchannels = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\njournal_dir = \"bj\"\n"
        ))
        .unwrap();
        assert_eq!(ok.bridge.unwrap().channels.len(), 2);
        let e = err("[bridge]\nchannels = []\njournal_dir = \"bj\"\n");
        assert!(e.starts_with("<string>: bridge.channels:"), "{e}");
        let e = err("[replayer]\nfollow_listen = \"127.0.0.1:1\"\n");
        assert!(
            e.starts_with("<string>: replayer.follow_listen: only a following"),
            "{e}"
        );
        let unicast =
            "[downstream]\ntransport = \"udp-unicast\"\nsubscribers = [\"127.0.0.1:7\"]\n";
        let e = Config::from_str(&format!(
            "[bus]\nsession = \"T\"\n{unicast}[replayer]\nfollow = true\njournal_dir = \"rj\"\nfollow_listen = \"127.0.0.1:8\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("<string>: replayer.follow_listen: 127.0.0.1:8 is not one of downstream.subscribers"),
            "{e}"
        );
        let e = Config::from_str(&format!(
            "[bus]\nsession = \"T\"\n{unicast}[replayer]\nfollow = true\njournal_dir = \"rj\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "<string>: replayer.follow_listen: a following replayer on a udp-unicast"
            ),
            "{e}"
        );
        let ok = Config::from_str(&format!(
            "[bus]\nsession = \"T\"\n{unicast}[replayer]\nfollow = true\njournal_dir = \"rj\"\nfollow_listen = \"127.0.0.1:7\"\n"
        ))
        .unwrap();
        assert_eq!(
            ok.replayer.follow_listen,
            Some("127.0.0.1:7".parse().unwrap())
        );
        let e = err("[replayer]\nfollow_tcp = [\"127.0.0.1:1\"]\n");
        assert!(
            e.starts_with("<string>: replayer.follow_tcp: only a following"),
            "{e}"
        );
        let e = err("[replayer]\ntcp_listen = \"127.0.0.1:1\"\n");
        assert!(
            e.starts_with(
                "<string>: tcp.credentials: at least one login required for replayer.tcp_listen"
            ),
            "{e}"
        );
        let e = err("[tls]\ncert = \"a.pem\"\n");
        assert!(
            e.starts_with("<string>: tls.cert: cert and key go together"),
            "{e}"
        );
        let e = err("[tls]\nca = \"/nonexistent/ca.pem\"\n");
        assert!(
            e.starts_with("<string>: tls.ca: /nonexistent/ca.pem: no such file"),
            "{e}"
        );
    }
}
