//! Walk plans kept on disk by build-id, so that a dump of an unchanged binary reads no DWARF.
//!
//! Planning reads megabytes of DWARF (a tenth of a second on a small program, more on a service), and
//! what it makes depends only on the binary and on this asyncdump. An [`Entry`] holds a
//! [`Plan`] for every root future type of one binary, made at load bias 0
//! ([`Plan::for_every_root`]), with what a dump says about where it came from; the session moves it
//! to the process's load bias ([`Plan::rebase`]).
//!
//! Files are `$XDG_CACHE_HOME/asyncdump/plans/<build-id>.plan` (`~/.cache` without it), and
//! `<build-id>-runtimes.plan` for the plan that also lists tokio runtimes' tasks. Directories are 0700
//! and files 0600, each written under a temporary name and renamed into place, so that a reader sees a
//! whole file or none. A file starts with [`MAGIC`], the format version, the identity of the
//! asyncdump that wrote it (its own build-id) and a checksum over that, the binary's build-id and the
//! entry: a file that is not ours, damaged, another binary's, of another version or another user's, or
//! whose plan does not hold together ([`asyncdump_protocol::WalkPlan::validate`]) is ignored, with a
//! note saying why, and replaced.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::output::{self, Existing};
use crate::plan::Plan;

/// What every cache file starts with.
pub const MAGIC: &[u8; 16] = b"asyncdump-plan\n\0";
/// Changes whenever the layout of [`Entry`] or of the file does.
pub const FORMAT_VERSION: u32 = 21;
/// Largest cache file read: far above any plan the agent takes (4 MiB on the wire).
const MAX_FILE_BYTES: u64 = 256 << 20;

/// One binary's plan, as kept.
#[derive(Serialize, Deserialize)]
pub struct Entry {
    /// The executable's GNU build-id, hex: the key, checked again on reading.
    pub build_id: String,
    /// Whether the plan also lists tokio runtimes' tasks.
    pub runtimes: bool,
    /// The file the DWARF was read from, for the dump's header.
    pub debug_file: String,
    pub debug_info_bytes: u64,
    /// Of the executable: for the load bias (see `dwarf::load_bias`).
    pub vaddr_at_zero: Option<u64>,
    /// Planned at load bias 0.
    pub decoder: Plan,
}

/// What a lookup found.
pub enum Lookup {
    Hit(Box<Entry>),
    /// No entry for this binary.
    Miss,
    /// A file was there and was not used; why, in a line.
    Ignored(String),
}

/// The plans directory of this user.
pub struct PlanCache {
    dir: PathBuf,
}

impl PlanCache {
    /// The cache of the user running asyncdump; `Err` says why there is none (no `$HOME`).
    pub fn open() -> Result<PlanCache, String> {
        let base = match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
                Some(home) => PathBuf::from(home).join(".cache"),
                None => return Err("neither $XDG_CACHE_HOME nor $HOME is set".to_owned()),
            },
        };
        Ok(PlanCache::at(base.join("asyncdump").join("plans")))
    }

    /// A cache in `dir` (made on first write).
    pub fn at(dir: PathBuf) -> PlanCache {
        PlanCache { dir }
    }

    /// Where the entry for `build_id` is.
    pub fn path(&self, build_id: &str, runtimes: bool) -> PathBuf {
        let name: String = build_id
            .chars()
            .filter(char::is_ascii_hexdigit)
            .take(64)
            .collect();
        let suffix = if runtimes { "-runtimes" } else { "" };
        self.dir.join(format!("{name}{suffix}.plan"))
    }

    /// The entry for `build_id`, if a usable one is there.
    pub fn get(&self, build_id: &str, runtimes: bool) -> Lookup {
        let path = self.path(build_id, runtimes);
        let ignored = |why: &str| {
            Lookup::Ignored(format!(
                "ignored the cached plan {}: {why}; planned again",
                path.display()
            ))
        };
        let bytes = match read_own(&path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Lookup::Miss,
            Err(why) => return ignored(&why),
        };
        let entry = match decode(&bytes, build_id, runtimes) {
            Ok(entry) => entry,
            Err(why) => return ignored(why),
        };
        if entry.build_id != build_id || entry.runtimes != runtimes {
            return ignored("it is another binary's");
        }
        if let Err(e) = entry.decoder.walk.validate() {
            return ignored(&format!("its plan does not hold together ({e})"));
        }
        Lookup::Hit(Box::new(entry))
    }

    /// Keeps `entry`, replacing any file of its key; returns where it went.
    pub fn put(&self, entry: &Entry) -> Result<PathBuf, String> {
        let path = self.path(&entry.build_id, entry.runtimes);
        let failed = |e: &dyn std::fmt::Display| {
            format!("the plan was not cached in {}: {e}", self.dir.display())
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| failed(&e))?;
        let bytes = encode(entry).map_err(|e| failed(&e))?;
        // Private: a plan says how to read the target's memory.
        output::write_whole(&path, &bytes, 0o600, Existing::Take).map_err(|e| failed(&e))?;
        Ok(path)
    }
}

/// The file at `path`, if it is there, and only if it is a regular file of ours that nobody else may
/// write (a plan is trusted to say how to read the target's memory and what to print).
fn read_own(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    if meta.uid() != crate::attach::target::euid() {
        return Err(format!("owned by uid {}, not by us", meta.uid()));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err("writable by others".to_owned());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err("over 256 MiB".to_owned());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(Some(bytes))
}

/// Who wrote a file: this asyncdump's own build-id (a rebuilt asyncdump may plan differently), else its
/// version and its executable's size and time.
fn writer() -> &'static str {
    static WRITER: OnceLock<String> = OnceLock::new();
    WRITER.get_or_init(|| {
        let exe = Path::new(crate::attach::procfs::OWN_EXE);
        match crate::dwarf::build_id(exe) {
            Ok(Some(id)) => id,
            _ => {
                let meta = std::fs::metadata(exe).ok();
                format!(
                    "{} {} {}",
                    env!("CARGO_PKG_VERSION"),
                    meta.as_ref().map_or(0, MetadataExt::size),
                    meta.as_ref().map_or(0, MetadataExt::mtime_nsec)
                )
            }
        }
    })
}

fn encode(entry: &Entry) -> Result<Vec<u8>, postcard::Error> {
    let payload = postcard::to_stdvec(entry)?;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let writer = writer().as_bytes();
    out.extend_from_slice(&(writer.len() as u32).to_le_bytes());
    out.extend_from_slice(writer);
    let sum = checksum(&entry.build_id, entry.runtimes, &payload);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The entry in `bytes`, if they hold one this asyncdump wrote, unchanged since, for `build_id`.
fn decode(bytes: &[u8], build_id: &str, runtimes: bool) -> Result<Entry, &'static str> {
    let rest = bytes.strip_prefix(MAGIC).ok_or("not a plan file")?;
    let (version, rest) = rest.split_at_checked(4).ok_or("damaged")?;
    if version != FORMAT_VERSION.to_le_bytes() {
        return Err("another format version");
    }
    let (len, rest) = rest.split_at_checked(4).ok_or("damaged")?;
    let len = u32::from_le_bytes(len.try_into().map_err(|_| "damaged")?) as usize;
    let (who, rest) = rest.split_at_checked(len).ok_or("damaged")?;
    if who != writer().as_bytes() {
        return Err("written by another asyncdump build");
    }
    let (sum, payload) = rest.split_at_checked(8).ok_or("damaged")?;
    if sum != checksum(build_id, runtimes, payload).to_le_bytes() {
        return Err("damaged, or another binary's: its checksum does not match");
    }
    postcard::from_bytes(payload).map_err(|_| "damaged")
}

/// A checksum of an entry's bytes and what they are for (the file is read back only by the build
/// that wrote it, so the hash need not be stable across releases).
fn checksum(build_id: &str, runtimes: bool, payload: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    // For damage, not for an adversary (one who can write the file can write its sum): a fast
    // hash, as every dump reads the whole file (SipHash took 3 % of a cached dump's instructions).
    let mut h = rustc_hash::FxHasher::default();
    (writer(), build_id, runtimes, payload).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache in a fresh directory, which lives as long as the first of the pair.
    fn scratch() -> (tempfile::TempDir, PlanCache) {
        let dir = crate::testing::scratch();
        let cache = PlanCache::at(dir.path().join("plans"));
        (dir, cache)
    }

    fn entry(build_id: &str) -> Entry {
        let mut decoder = Plan::default();
        decoder
            .walk
            .types
            .push(asyncdump_protocol::TypePlan::default());
        decoder.walk.roots.push((0x1234, 0));
        Entry {
            build_id: build_id.to_owned(),
            runtimes: false,
            debug_file: "/bin/svc".to_owned(),
            debug_info_bytes: 42,
            vaddr_at_zero: Some(0),
            decoder,
        }
    }

    fn ignored_because(lookup: Lookup) -> String {
        match lookup {
            Lookup::Ignored(why) => why,
            Lookup::Hit(_) => panic!("used"),
            Lookup::Miss => panic!("missed"),
        }
    }

    #[test]
    fn an_entry_comes_back_as_it_was_kept_in_a_private_file() {
        let (_dir, cache) = scratch();
        assert!(matches!(cache.get("ab12", false), Lookup::Miss));
        let path = cache.put(&entry("ab12")).unwrap();
        let Lookup::Hit(got) = cache.get("ab12", false) else {
            panic!("not found")
        };
        assert_eq!(got.decoder.walk.roots, [(0x1234, 0)]);
        assert_eq!(got.debug_file, "/bin/svc");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // The plan with runtimes is another entry.
        assert!(matches!(cache.get("ab12", true), Lookup::Miss));
    }

    #[test]
    fn a_damaged_or_foreign_file_is_ignored_with_the_reason() {
        let (_dir, cache) = scratch();
        let path = cache.put(&entry("cd34")).unwrap();
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 3]).unwrap();
        assert!(ignored_because(cache.get("cd34", false)).contains("damaged"));
        // Any one byte changed past the header, wherever it is, is seen (before the checksum, a
        // change that still decoded gave another plan, used silently).
        let header = MAGIC.len() + 8 + writer().len();
        for at in header..whole.len() {
            let mut changed = whole.clone();
            changed[at] ^= 0x5a;
            std::fs::write(&path, &changed).unwrap();
            assert!(
                ignored_because(cache.get("cd34", false)).contains("damaged"),
                "byte {at}"
            );
        }
        std::fs::write(&path, b"#!/bin/sh\n").unwrap();
        assert!(ignored_because(cache.get("cd34", false)).contains("not a plan file"));
        let mut other_version = whole.clone();
        other_version[MAGIC.len()] ^= 0xff;
        std::fs::write(&path, &other_version).unwrap();
        assert!(ignored_because(cache.get("cd34", false)).contains("another format version"));
        // Another binary's entry under this one's name.
        std::fs::write(&path, encode(&entry("ef56")).unwrap()).unwrap();
        assert!(ignored_because(cache.get("cd34", false)).contains("another binary's"));
        // A plan that does not hold together, kept with a checksum that matches it.
        let mut broken = entry("cd34");
        broken.decoder.walk.roots.push((0x99, 7));
        std::fs::write(&path, encode(&broken).unwrap()).unwrap();
        let why = ignored_because(cache.get("cd34", false));
        assert!(
            why.contains("its plan does not hold together (roots entry 0x99 names type 7 of 1)"),
            "{why}"
        );
    }

    #[test]
    fn a_file_others_could_have_written_is_not_trusted() {
        let (_dir, cache) = scratch();
        let path = cache.put(&entry("0a0b")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(ignored_because(cache.get("0a0b", false)).contains("writable by others"));
        let real = path.with_extension("real");
        std::fs::rename(&path, &real).unwrap();
        std::os::unix::fs::symlink(&real, &path).unwrap();
        assert!(!matches!(cache.get("0a0b", false), Lookup::Hit(_)));
        // Keeping the plan again replaces the symlink, not what it points to.
        cache.put(&entry("0a0b")).unwrap();
        assert!(matches!(cache.get("0a0b", false), Lookup::Hit(_)));
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    }

    #[test]
    fn a_key_names_no_other_path() {
        let (_dir, cache) = scratch();
        let path = cache.path("../../etc/passwd", false);
        assert_eq!(path.parent(), Some(cache.dir.as_path()));
    }
}
