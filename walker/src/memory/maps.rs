//! Lines of `/proc/PID/maps`: one parser for everyone who reads the map (the census's writable
//! regions, the inspector's load bias, its threads' mapped files, its first readable page).

/// One mapping, as a line of `/proc/PID/maps` has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    /// `r`, `w`, `x` or `-` each, then `p` (private) or `s` (shared).
    pub perms: &'a str,
    /// Where in the file the mapping starts.
    pub offset: u64,
    /// The file's inode; 0 for an anonymous mapping.
    pub inode: u64,
    /// The file's path (it may hold spaces, and end with ` (deleted)`), a name such as `[heap]`,
    /// or empty.
    pub path: &'a str,
}

/// The mapping `line` describes; `None` for a line that is no mapping.
pub fn parse(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start_matches(' ');
        let end = t.find(' ').unwrap_or(t.len());
        let (f, after) = t.split_at(end);
        rest = after;
        Some(f).filter(|f| !f.is_empty())
    };
    let (range, perms, offset, _device, inode) = (field()?, field()?, field()?, field()?, field()?);
    let (start, end) = range.split_once('-')?;
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    Some(MapsLine {
        start: hex(start)?,
        end: hex(end)?,
        perms,
        offset: hex(offset)?,
        inode: inode.parse().ok()?,
        path: rest.trim_start_matches(' '),
    })
}

/// Every mapping of a `/proc/PID/maps` text, in its order; lines that are no mapping left out.
pub fn lines(maps: &str) -> impl Iterator<Item = MapsLine<'_>> {
    maps.lines().filter_map(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_gives_its_range_permissions_offset_inode_and_path_spaces_and_all() {
        let maps = "\
5555a000-5555b000 r--p 00000000 08:01 1234     /usr/bin/app
7f00-8f00 rw-p 00000000 00:00 0 
7ffd0000-7ffd1000 rw-p 00000000 00:00 0        [stack]
b000-c000 r-xp 00002000 08:01 98     /opt/with space.so (deleted)
zz-10 r--p 0 0 0 /bad
1000-2000 r--p
";
        let got: Vec<MapsLine> = lines(maps).collect();
        assert_eq!(got.len(), 4, "{got:?}");
        let app = MapsLine {
            start: 0x5555a000,
            end: 0x5555b000,
            perms: "r--p",
            offset: 0,
            inode: 1234,
            path: "/usr/bin/app",
        };
        assert_eq!(got[0], app);
        assert_eq!((got[1].inode, got[1].path), (0, ""));
        assert_eq!(got[2].path, "[stack]");
        assert_eq!(
            (got[3].offset, got[3].path),
            (0x2000, "/opt/with space.so (deleted)")
        );
    }

    #[test]
    fn this_process_maps_its_own_executable() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.to_str().unwrap();
        assert!(lines(&maps).any(|m| m.path == exe && m.offset == 0 && m.inode != 0));
    }
}
