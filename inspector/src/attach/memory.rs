//! A process's memory read by its agent ([`Request::Read`](asyncdump_protocol::Request::Read)), as a
//! walker [`Memory`]: what a client may read when the kernel would not let it read the process
//! itself, but the agent lets it walk. An agent that cannot (one older than the request) or will
//! not answer is asked no more, and the process is read from outside instead, where that is allowed.
//! Where the kernel allows it, reading from outside comes first ([`readable_from_outside`]): the
//! agent's thread would spend the process's time reading and copying every byte for us.

use std::cell::RefCell;

use asyncdump_protocol::{
    MAX_CHASE, MAX_CHASE_NODES, MAX_READ_BYTES, MAX_READ_RANGES, MAX_REQUEST_BYTES, ReadRequest,
};
use asyncdump_walker::{Chased, Memory, ProcessMemory, Read, Unreadable};

use super::client::Client;

/// Most ranges asked for in one request: the agent's limit, and each takes at most 15 bytes of it,
/// encoded.
const MAX_RANGES: usize = if MAX_READ_RANGES < MAX_REQUEST_BYTES / 16 {
    MAX_READ_RANGES
} else {
    MAX_REQUEST_BYTES / 16
};

/// Whether the kernel lets this process read `pid`'s memory itself ([`ProcessMemory::access`]).
pub fn readable_from_outside(pid: u32) -> bool {
    ProcessMemory::of(pid as i32).access().is_ok()
}

/// Reads through the agent's socket while it answers, then from outside.
pub struct AgentMemory<'a> {
    agent: RefCell<Option<&'a mut Client>>,
    outside: ProcessMemory,
}

impl<'a> AgentMemory<'a> {
    pub fn new(client: &'a mut Client, pid: u32) -> AgentMemory<'a> {
        AgentMemory {
            agent: RefCell::new(Some(client)),
            outside: ProcessMemory::of(pid as i32),
        }
    }

    /// Whether the agent answered every read so far.
    pub fn through_agent(&self) -> bool {
        self.agent.borrow().is_some()
    }

    /// One request's worth of `reads`, through the agent; `Err` if it did not answer.
    fn ask(client: &mut Client, reads: &mut [Read<'_>]) -> Result<(), ()> {
        let ranges = reads.iter().map(|r| (r.addr, r.dst.len() as u32)).collect();
        let req = ReadRequest {
            ranges,
            chases: Vec::new(),
        };
        let answers = client.read_memory(req).map_err(|_| ())?.data;
        for (r, bytes) in reads.iter_mut().zip(answers.iter()) {
            match bytes {
                Some(b) if b.len() == r.dst.len() => r.dst.copy_from_slice(b),
                _ => r.failed = true,
            }
        }
        Ok(())
    }
}

impl Memory for AgentMemory<'_> {
    fn chase(&self, at: u64, next: u32, max: usize) -> Chased {
        let mut agent = self.agent.borrow_mut();
        if let Some(client) = agent.as_deref_mut() {
            let max = max.min(MAX_CHASE as usize) as u32;
            let req = ReadRequest {
                ranges: Vec::new(),
                chases: vec![(at, next, max)],
            };
            match client.read_memory(req) {
                Ok(mut r) => return r.chased.pop().unwrap_or_default(),
                Err(_) => *agent = None,
            }
        }
        drop(agent);
        self.outside.chase(at, next, max)
    }

    fn chase_all(&self, lists: &[(u64, u32, usize)]) -> Vec<Chased> {
        let mut agent = self.agent.borrow_mut();
        let mut out = Vec::with_capacity(lists.len());
        if let Some(client) = agent.as_deref_mut() {
            // As many lists a request as its limits let the agent follow and send back.
            let nodes = |max: usize| u64::from((max as u32).min(MAX_CHASE));
            let room = MAX_CHASE_NODES.min(MAX_READ_BYTES / 8);
            while out.len() < lists.len() {
                let (mut end, mut taken) = (out.len(), 0);
                while end < lists.len() && (end == out.len() || taken + nodes(lists[end].2) <= room)
                {
                    taken += nodes(lists[end].2);
                    end += 1;
                }
                let chases = (lists[out.len()..end].iter())
                    .map(|&(at, next, max)| (at, next, (max as u32).min(MAX_CHASE)))
                    .collect();
                let req = ReadRequest {
                    ranges: Vec::new(),
                    chases,
                };
                match client.read_memory(req) {
                    Ok(r) if r.chased.len() == end - out.len() => out.extend(r.chased),
                    _ => {
                        *agent = None;
                        break;
                    }
                }
            }
        }
        drop(agent);
        let rest = &lists[out.len()..];
        out.extend(self.outside.chase_all(rest));
        out
    }

    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        let mut agent = self.agent.borrow_mut();
        let Some(client) = agent.as_deref_mut() else {
            return self.outside.read_many(reads);
        };
        let mut start = 0;
        while start < reads.len() {
            // Requests stay under the agent's limits: ranges, and bytes all together.
            let (mut end, mut bytes) = (start, 0u64);
            while end < reads.len() && end - start < MAX_RANGES {
                let len = reads[end].dst.len() as u64;
                if end > start && bytes + len > MAX_READ_BYTES {
                    break;
                }
                bytes += len;
                end += 1;
            }
            if Self::ask(client, &mut reads[start..end]).is_err() {
                *agent = None;
                reads[start..].iter_mut().for_each(|r| r.failed = false);
                return self.outside.read_many(&mut reads[start..]);
            }
            start = end;
        }
        Ok(())
    }
}
