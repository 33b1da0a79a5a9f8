//! Power loss: every node's data directory sits on its own mount of
//! `leafraft_tools::lazyfs`, which keeps what a node writes in memory until it is synced.
//!
//! - `power-loss`: kill -9 one node (the leader half the time), then a power cut on its disk: every
//!   write, new file, rename and delete it never synced is gone. It restarts on what is left.
//! - `power-loss-all`: kill -9 every node, a power cut on every disk, all restarted.
//!
//! The node is dead before the cut, as on a real power cut, and restarts on the same mount.
//! `--fsync false` on the runner starts the nodes with `--fsync false`: the unsafe comparison.

use std::path::Path;
use std::sync::Arc;

use crate::faults::FaultKind;
use crate::faults::Plan;
use crate::faults::Record;
use crate::nodes::Leader;
use crate::nodes::Nodes;

/// Kills the plan's victims and cuts their power; answers who was hit.
pub fn cut(nodes: &Arc<Nodes>, record: &Arc<Record>, plan: Plan, leader: Option<Leader>) -> Vec<u64> {
    let ev = |text: String| record.event(nodes, text);
    let victims = if plan.kind == FaultKind::PowerLossAll {
        nodes.ids()
    } else {
        let running = nodes.running();
        let victim = match leader {
            Some(leader) if plan.coin => Some(leader.node),
            _ if running.is_empty() => None,
            _ => Some(running[(plan.pick % running.len() as u64) as usize]),
        };
        victim.into_iter().collect()
    };
    if victims.is_empty() {
        ev(format!("{}: no node to hit", plan.kind.name()));
        return victims;
    }
    let role = |id: u64| if leader.is_some_and(|l| l.node == id) { " (leader)" } else { "" };
    let names: Vec<String> = victims.iter().map(|id| format!("{id}{}", role(*id))).collect();
    ev(format!(
        "power cut on node{} {}: kill -9, drop every unsynced write, restart after {:.1}s",
        if victims.len() > 1 { "s" } else { "" },
        names.join(", "),
        plan.hold.as_secs_f64()
    ));
    for &id in &victims {
        nodes.resume(id);
        nodes.kill(id);
    }
    for &id in &victims {
        match nodes.power_cut(id) {
            Ok(lost) => ev(format!(
                "  node {id} lost {} unsynced bytes in {} files and {} directory entries",
                lost.unsynced_bytes, lost.files, lost.entries
            )),
            Err(e) => ev(format!("  POWER CUT OF NODE {id} FAILED: {e:#}")),
        }
    }
    victims
}

pub fn restart(nodes: &Nodes, record: &Record, victims: &[u64]) {
    for &id in victims {
        record.event(nodes, format!("restart node {id} after its power cut"));
        if let Err(e) = nodes.start(id) {
            record.event(nodes, format!("restart of node {id} failed: {e:#}"));
        }
    }
}

/// Says in one line why power loss cannot be injected here, if it cannot: FUSE probed with a
/// known-good file system (`leafraft_tools::fuse_probe`), never with LazyFS, the code under test.
pub fn unavailable() -> Option<String> {
    leafraft_tools::fuse_probe::usable().err()
}

/// Detaches power-loss mounts left by runs whose runner died (`/tmp/leafraft-chaos-PID-SEED/…`).
pub fn cleanup_stale_mounts() {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else { return };
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(source), Some(point)) = (fields.next(), fields.next()) else { continue };
        if source != leafraft_tools::lazyfs::FS_NAME {
            continue;
        }
        let owner = point
            .split('/')
            .find_map(|part| part.strip_prefix("leafraft-chaos-"))
            .and_then(|rest| rest.split('-').next())
            .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if owner.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
            if let Ok(path) = std::ffi::CString::new(point) {
                // SAFETY: umount2(2) with a valid NUL-terminated path; MNT_DETACH never blocks.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::faults::FaultKind;

    #[test]
    fn power_loss_is_asked_for_by_name_and_never_part_of_all() {
        let all: Vec<FaultKind> = FaultKind::all().collect();
        assert_eq!(all.len(), 15, "`all` keeps the fourteen kinds its seeds were picked for, and the move");
        assert!(all.iter().all(|kind| !kind.needs_lazy_disks()));
        assert_eq!(FaultKind::parse("power-loss"), Some(FaultKind::PowerLoss));
        assert_eq!(FaultKind::parse("power-loss-all"), Some(FaultKind::PowerLossAll));
        let (main, _) = crate::faults::lanes(112, &all);
        assert!(main.take(500).all(|plan| !plan.kind.needs_lazy_disks()));
        let (main, _) = crate::faults::lanes(1, &[FaultKind::PowerLoss, FaultKind::PowerLossAll]);
        let kinds: Vec<FaultKind> = main.take(100).map(|plan| plan.kind).collect();
        assert!(kinds.contains(&FaultKind::PowerLoss) && kinds.contains(&FaultKind::PowerLossAll));
    }
}
