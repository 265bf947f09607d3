//! Files a user, a core or a debug link names are never trusted: a FIFO where a core, an executable
//! or a debug file should be is refused at once (opening one waits for a writer), and nothing a file
//! holds makes the inspector hang or run out of memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::{
    Fixture, asyncdump_command, bin, output_within, plan_cache_of_this_run, run_tool, tempdir,
};

/// Runs asyncdump with `args`, failing the spec if it takes longer than `within`.
pub fn asyncdump_within(args: &[&str], within: Duration) -> Output {
    output_within(asyncdump_command(args, &[]), within, String::new)
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// `--core` of a FIFO waited for a writer forever: it was opened before it was checked.
#[test]
fn a_fifo_given_as_a_core_or_a_snapshot_is_refused_at_once() {
    let dir = tempdir();
    let fifo = dir.join("core");
    mkfifo(&fifo);
    let out = asyncdump_within(
        &["dump", "--core", fifo.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a regular file (a FIFO)"),
        "{}",
        stderr(&out)
    );
    let out = asyncdump_within(
        &["watch", "--from", fifo.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
}

/// Replaces every `from` in `bytes` with `to`, of the same length; how many there were.
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut n = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + i..at + i + from.len()].copy_from_slice(to);
        at += i + from.len();
        n += 1;
    }
    n
}

/// A path in `dir`, as long as `like`, for a file named from `stem` padded out.
fn path_as_long_as(dir: &Path, stem: &str, like: &Path) -> PathBuf {
    let room = like.as_os_str().len() - dir.as_os_str().len() - 1;
    assert!(
        room >= stem.len(),
        "the scratch directory's path is too long"
    );
    dir.join(format!("{stem}{}", "f".repeat(room - stem.len())))
}

// A core whose notes name a FIFO as the executable hung the dump.
#[test]
fn a_core_naming_a_fifo_as_its_executable_is_not_waited_for() {
    let fx = Fixture::start("no_agent", &[]);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let exe = std::fs::canonicalize(bin("no_agent")).unwrap();
    let fifo = path_as_long_as(dir.as_path(), "x", &exe);
    mkfifo(&fifo);
    let mut bytes = std::fs::read(&core).unwrap();
    let named = replace_all(
        &mut bytes,
        exe.as_os_str().as_encoded_bytes(),
        fifo.as_os_str().as_encoded_bytes(),
    );
    assert!(named > 0, "the core names its executable");
    std::fs::write(&core, bytes).unwrap();
    let out = asyncdump_within(
        &["dump", "--core", core.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
}

// A `.gnu_debuglink` naming a FIFO (in another user's program, say) hung the dump of it.
#[test]
fn a_debug_link_naming_a_fifo_is_passed_over() {
    let dir = tempdir();
    let exe = dir.join("plain_chain");
    std::fs::copy(bin("plain_chain"), &exe).unwrap();
    let debug = dir.join("plain_chain.debug");
    let (exe_s, debug_s) = (exe.to_str().unwrap(), debug.to_str().unwrap());
    run_tool("objcopy", &["--only-keep-debug", exe_s, debug_s]);
    run_tool("strip", &["--strip-debug", exe_s]);
    run_tool(
        "objcopy",
        &[&format!("--add-gnu-debuglink={debug_s}"), exe_s],
    );
    std::fs::remove_file(&debug).unwrap();
    mkfifo(&debug);
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    let out = asyncdump_within(
        &["dump", &fx.pid.to_string(), "--no-cache"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("[decoded]"), "{text}");
}

// A 1 GiB `.debug_info` made of a megabyte of zlib aborted the inspector: the DIE table reserved
// about 26 bytes a byte of it (27 GB) before reading a DIE.
#[test]
fn a_debug_section_that_claims_a_gigabyte_from_a_megabyte_is_refused_in_one_line() {
    let dir = tempdir();
    let exe = dir.join("bomb");
    std::fs::copy(bin("plain_chain"), &exe).unwrap();
    let exe_s = exe.to_str().unwrap();
    run_tool("strip", &["--strip-debug", exe_s]);
    // A gigabyte of zeros as the DWARF, sparse on disk, then compressed into the binary.
    let zeros = dir.join("zeros");
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let section = format!(".debug_info={}", zeros.display());
    run_tool("objcopy", &["--add-section", &section, exe_s]);
    std::fs::remove_file(&zeros).unwrap();
    run_tool("objcopy", &["--compress-debug-sections=zlib", exe_s]);
    assert!(std::fs::metadata(&exe).unwrap().len() < 64 << 20);
    let out = asyncdump_within(&["index", exe_s], Duration::from_secs(60));
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(134), "aborted: {err}");
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("decompression bomb"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

// `ps` read a program's whole symbol table to see whether it links tokio: 2 GB for a 2 GiB (sparse)
// one. It reads the names only, a megabyte at a time.
#[test]
fn ps_reads_a_huge_symbol_table_in_little_memory() {
    let dir = tempdir();
    // One current-thread runtime: no thread bears a worker's name, the symbols tell.
    let exe = dir.join("signals");
    std::fs::copy(bin("signals"), &exe).unwrap();
    let grown = grow_section(&exe, ".symtab", 2 << 30);
    assert!(grown, "the copy has a .symtab");
    let fx = Fixture::start_path(&exe, &[], &[]);
    // At most 1 GB of address space: reading the table whole would fail.
    let ps = format!(
        "ulimit -v 1000000; exec {} ps --json",
        env!("CARGO_BIN_EXE_asyncdump")
    );
    let out = Command::new("sh")
        .args(["-c", &ps])
        .env("XDG_CACHE_HOME", plan_cache_of_this_run())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("\"pid\": {}", fx.pid)), "{text}");
}

/// Makes `exe`'s section `wanted` claim `size` more bytes past the end of the file (its old bytes
/// kept in front, the rest a hole of zeros: null symbols, empty names): its section header's offset
/// and size rewritten, the file extended sparsely. Nothing that runs the program reads section
/// headers.
fn grow_section(exe: &Path, wanted: &str, size: u64) -> bool {
    let mut bytes = std::fs::read(exe).unwrap();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u16_at =
        |b: &[u8], at: usize| u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&bytes, 0x28) as usize,
        u16_at(&bytes, 0x3a),
        u16_at(&bytes, 0x3c),
        u16_at(&bytes, 0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(&bytes, header(shstrndx) + 0x18) as usize;
    let len = bytes.len() as u64;
    for i in 0..shnum {
        let h = header(i);
        let name = names + u32_at(&bytes, h) as usize;
        if bytes[name..].starts_with(format!("{wanted}\0").as_bytes()) {
            let (old_off, old_size) = (u64_at(&bytes, h + 0x18), u64_at(&bytes, h + 0x20));
            let old = bytes[old_off as usize..(old_off + old_size) as usize].to_vec();
            bytes[h + 0x18..h + 0x20].copy_from_slice(&len.to_le_bytes());
            bytes[h + 0x20..h + 0x28].copy_from_slice(&(old_size + size).to_le_bytes());
            bytes.extend_from_slice(&old);
            std::fs::write(exe, &bytes).unwrap();
            let file = std::fs::OpenOptions::new().write(true).open(exe).unwrap();
            file.set_len(len + old_size + size).unwrap();
            return true;
        }
    }
    false
}

/// The program headers of an ELF file in `bytes`: `(index, type, offset of the header)`.
fn program_headers(bytes: &[u8]) -> Vec<(usize, u32, usize)> {
    let phoff = u64::from_le_bytes(bytes[0x20..0x28].try_into().unwrap()) as usize;
    let size = u16::from_le_bytes([bytes[0x36], bytes[0x37]]) as usize;
    let count = u16::from_le_bytes([bytes[0x38], bytes[0x39]]) as usize;
    (0..count)
        .map(|i| {
            let at = phoff + i * size;
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            (i, kind, at)
        })
        .collect()
}

fn set_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Runs asyncdump with `args` to its end (within `within`); its output and its peak resident
/// memory, in KiB, as GNU time counts it. The `ru_maxrss` of a child of this test would start at the
/// test's own: a process keeps, across its exec, the peak of the memory it forked with.
fn asyncdump_peak(args: &[&str], within: Duration) -> (Output, u64) {
    use std::os::unix::process::CommandExt;
    let dir = tempdir();
    let counted = dir.join("peak");
    let plain = asyncdump_command(args, &[]);
    let mut command = Command::new("/usr/bin/time");
    command
        .args(["-f", "%M", "-o"])
        .arg(&counted)
        .arg(plain.get_program())
        .args(plain.get_args())
        .envs(plain.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let out = output_within(command, within, String::new);
    let counted = std::fs::read_to_string(&counted).unwrap();
    // GNU time's last line is the count; a line before it says how the command ended, if oddly.
    let peak = counted.lines().last().and_then(|l| l.trim().parse().ok());
    (
        out,
        peak.unwrap_or_else(|| panic!("GNU time wrote {counted:?}")),
    )
}

// A core's census had no deadline and scanned all a segment claimed: 2^62 bytes hung it; a 2 GiB
// note segment was read whole (2 GB).
#[test]
fn a_core_whose_segments_claim_the_address_space_is_read_as_far_as_it_holds() {
    let fx = Fixture::start("no_agent", &[]);
    crate::agentless::dump_settled(fx.pid, &[], 5);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let core_s = core.to_str().unwrap();
    let mut bytes = std::fs::read(&core).unwrap();
    let headers = program_headers(&bytes);
    // Every writable memory segment claims 2^62 bytes; the file holds what it held.
    for &(_, kind, at) in &headers {
        let writable = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) & 2 != 0;
        if kind == 1 && writable {
            set_u64(&mut bytes, at + 0x28, 1 << 62);
        }
    }
    // The note segment, moved to the end of the file, claims 2 GiB more than it holds: a hole of
    // zeros past the end.
    let &(_, _, note) = headers.iter().find(|h| h.1 == 4).unwrap();
    let (offset, size) = (
        u64::from_le_bytes(bytes[note + 8..note + 16].try_into().unwrap()),
        u64::from_le_bytes(bytes[note + 0x20..note + 0x28].try_into().unwrap()),
    );
    let notes = bytes[offset as usize..(offset + size) as usize].to_vec();
    let moved_to = bytes.len() as u64;
    set_u64(&mut bytes, note + 8, moved_to);
    set_u64(&mut bytes, note + 0x20, size + (2 << 30));
    bytes.extend_from_slice(&notes);
    let len = bytes.len() as u64;
    std::fs::write(&core, &bytes).unwrap();
    drop(bytes);
    let file = std::fs::OpenOptions::new().write(true).open(&core).unwrap();
    file.set_len(len + (2 << 30)).unwrap();
    let (out, peak_kib) = asyncdump_peak(&["dump", "--core", core_s], Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("no_agent::query_database"), "{text}");
    eprintln!(
        "a core claiming the address space: peak {} MB",
        peak_kib >> 10
    );
    assert!(peak_kib < 256 << 10, "peak {peak_kib} KiB");
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

// A `--debug-file` of another build, its build-id forged to match, gave `0 tasks` and nothing
// said: it is refused, naming how its sections differ.
#[test]
fn a_debug_file_of_another_build_with_a_forged_build_id_is_refused() {
    let fx = Fixture::start("no_agent", &[]);
    let dir = tempdir();
    let forged = dir.join("forged.debug");
    let (other, forged_s) = (bin("plain_tasks"), forged.to_str().unwrap());
    run_tool(
        "objcopy",
        &["--only-keep-debug", other.to_str().unwrap(), forged_s],
    );
    let id = |p: &Path| asyncdump::dwarf::build_id(p).unwrap().unwrap();
    let (theirs, ours) = (unhex(&id(&forged)), unhex(&id(&bin("no_agent"))));
    let mut bytes = std::fs::read(&forged).unwrap();
    assert_eq!(replace_all(&mut bytes, &theirs, &ours), 1);
    std::fs::write(&forged, bytes).unwrap();
    assert_eq!(id(&forged), id(&bin("no_agent")));
    let out = asyncdump_within(
        &[
            "dump",
            &fx.pid.to_string(),
            "--debug-file",
            forged_s,
            "--no-cache",
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("but is not its debug file"), "{err}");
    assert!(err.contains("another build"), "{err}");
}
