//! Per-node network namespaces, so a chaos run can partition nodes from each other.
//!
//! Topology for a run with tag `T` and subnet `X`:
//!
//! ```text
//!   root namespace (runner)             node namespaces
//!   bridge Tb 10.213.X.254/24 ── Tv0 ══ eth0 10.213.X.1  in T-n0
//!                             ── Tv1 ══ eth0 10.213.X.2  in T-n1
//!                             ── ...
//! ```
//!
//! Every node sits on one flat L2 segment with the runner, so the runner reaches every node as a client
//! straight through the bridge. Partitions are `DROP` rules in a `CHAOS` chain inside the *nodes'*
//! namespaces that only name other nodes' addresses: a cut never touches the bridge address, so the
//! runner can keep observing both sides of a partition, and healing is just flushing the chains.
//!
//! Bridged frames bypass root-namespace iptables unless `br_netfilter` is loaded; when it is (Docker
//! hosts), their FORWARD policy is often DROP, so an ACCEPT rule for bridge-to-bridge traffic is added
//! (and removed on teardown) instead of flipping a global sysctl that other workloads may rely on.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use anyhow::{bail, ensure, Context, Result};

const CHAIN: &str = "CHAOS";
const BRIDGE_NF: &str = "/proc/sys/net/bridge/bridge-nf-call-iptables";
const NETNS_DIR: &str = "/var/run/netns";

pub struct Net {
    subnet: u8,
    bridge: String,
    namespaces: Vec<String>,
    veths: Vec<String>,
    /// Whether the root FORWARD rule was added, so teardown never deletes a rule someone else owns.
    forward_rule: bool,
    cuts: Mutex<BTreeSet<(usize, usize)>>,
    torn_down: bool,
}

impl Net {
    /// Ok when this process can build namespaces, else a one-line reason.
    pub fn available() -> Result<(), String> {
        let status =
            std::fs::read_to_string("/proc/self/status").map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
        // The Uid line is "real effective saved fs"; capabilities follow the effective uid.
        let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|r| r.split_whitespace().nth(1));
        if euid != Some("0") {
            return Err("not root".into());
        }
        for prog in ["ip", "iptables"] {
            if !on_path(prog) {
                return Err(format!("{prog} not found"));
            }
        }
        Ok(())
    }

    /// Builds the bridge and `slots` namespaces; on failure tears down whatever was built.
    pub fn create(tag: &str, subnet: u8, slots: usize) -> Result<Net> {
        // Up to 9 chars so "lc" + any Linux pid fits; the longest interface name is then 13 < 16.
        ensure!(
            !tag.is_empty() && tag.len() <= 9 && tag.bytes().all(|b| b.is_ascii_alphanumeric()),
            "bad network tag {tag:?}: want 1..=9 ASCII alphanumerics"
        );
        ensure!((1..=250).contains(&subnet), "bad subnet {subnet}: want 1..=250");
        // .254 is the bridge, so at most 253 node addresses.
        ensure!((1..=253).contains(&slots), "bad slot count {slots}: want 1..=253");
        remove_matching(|t| t == tag);
        let mut net = Net {
            subnet,
            bridge: format!("{tag}b"),
            namespaces: (0..slots).map(|i| format!("{tag}-n{i}")).collect(),
            veths: (0..slots).map(|i| format!("{tag}v{i}")).collect(),
            forward_rule: false,
            cuts: Mutex::new(BTreeSet::new()),
            torn_down: false,
        };
        // On error `net` is dropped here, which tears down the partial build.
        net.build().with_context(|| format!("building chaos network {tag}"))?;
        Ok(net)
    }

    fn build(&mut self) -> Result<()> {
        let br = self.bridge.clone();
        run(&["ip", "link", "add", &br, "type", "bridge"])?;
        run(&["ip", "addr", "add", &format!("{}/24", self.gateway()), "dev", &br])?;
        run(&["ip", "link", "set", &br, "up"])?;
        if Path::new(BRIDGE_NF).exists() {
            run(&forward_rule("-I", &br))?;
            self.forward_rule = true;
        }
        for slot in 0..self.slots() {
            let (ns, veth) = (self.namespaces[slot].as_str(), self.veths[slot].as_str());
            run(&["ip", "netns", "add", ns])?;
            // Creating the peer directly inside the namespace avoids a temporary root-side name clash.
            run(&["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])?;
            run(&["ip", "link", "set", veth, "master", &br])?;
            run(&["ip", "link", "set", veth, "up"])?;
            run(&["ip", "-n", ns, "addr", "add", &format!("{}/24", self.addr(slot)), "dev", "eth0"])?;
            run(&["ip", "-n", ns, "link", "set", "eth0", "up"])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            self.iptables(slot, &["-N", CHAIN])?;
            self.iptables(slot, &["-A", "INPUT", "-j", CHAIN])?;
            self.iptables(slot, &["-A", "OUTPUT", "-j", CHAIN])?;
        }
        Ok(())
    }

    pub fn slots(&self) -> usize {
        self.namespaces.len()
    }

    /// The node address of slot i (10.213.X.(i+1)).
    pub fn addr(&self, slot: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.subnet, slot as u8 + 1)
    }

    /// The runner's own address on the bridge; never cut.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.subnet, 254)
    }

    pub fn namespace(&self, slot: usize) -> &str {
        &self.namespaces[slot]
    }

    /// The argv prefix that runs a program inside slot i's namespace.
    pub fn exec_prefix(&self, slot: usize) -> Vec<String> {
        ["ip", "netns", "exec", self.namespace(slot)].map(String::from).to_vec()
    }

    /// Drops all traffic between slots a and b, both directions; cutting a cut pair again is a no-op.
    pub fn cut(&self, a: usize, b: usize) -> Result<()> {
        let n = self.slots();
        ensure!(a != b && a < n && b < n, "cannot cut {a}-{b} in a {n}-slot network");
        let pair = (a.min(b), a.max(b));
        // Held across the commands so a concurrent heal cannot interleave with a half-made cut.
        let mut cuts = self.cuts.lock().unwrap_or_else(|e| e.into_inner());
        if cuts.contains(&pair) {
            return Ok(());
        }
        for (me, peer) in [(a, b), (b, a)] {
            let ip = self.addr(peer).to_string();
            self.iptables(me, &["-A", CHAIN, "-s", &ip, "-j", "DROP"])?;
            self.iptables(me, &["-A", CHAIN, "-d", &ip, "-j", "DROP"])?;
        }
        cuts.insert(pair);
        Ok(())
    }

    /// Restores all traffic between all slots.
    pub fn heal_all(&self) -> Result<()> {
        let mut cuts = self.cuts.lock().unwrap_or_else(|e| e.into_inner());
        // Flush every chain even if one fails, so a single broken namespace does not keep others cut.
        let mut first_err = None;
        for slot in 0..self.slots() {
            if let Err(e) = self.iptables(slot, &["-F", CHAIN]) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => {
                cuts.clear();
                Ok(())
            }
        }
    }

    /// Pairs currently cut, each as (min, max), sorted.
    pub fn cut_pairs(&self) -> Vec<(usize, usize)> {
        self.cuts.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }

    /// Best-effort removal of everything this Net built; idempotent.
    pub fn teardown(&mut self) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        // Veths first: deleting one removes its peer synchronously, whereas a deleted namespace frees its
        // devices asynchronously and would race with an explicit delete.
        for link in self.veths.iter().chain([&self.bridge]) {
            if link_exists(link) {
                report(run(&["ip", "link", "del", link]));
            }
        }
        for ns in &self.namespaces {
            if Path::new(NETNS_DIR).join(ns).exists() {
                report(run(&["ip", "netns", "del", ns]));
            }
        }
        if self.forward_rule {
            report(run(&forward_rule("-D", &self.bridge)));
            self.forward_rule = false;
        }
    }

    fn iptables(&self, slot: usize, args: &[&str]) -> Result<String> {
        let mut argv = vec!["ip", "netns", "exec", self.namespace(slot), "iptables", "-w"];
        argv.extend_from_slice(args);
        run(&argv)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.teardown()
    }
}

/// Removes namespaces, links and FORWARD rules of chaos runs ("lc" + runner pid) whose runner is gone.
pub fn cleanup_stale() {
    remove_matching(|tag| {
        tag.strip_prefix("lc").is_some_and(|pid| is_digits(pid) && !Path::new("/proc").join(pid).exists())
    });
}

/// Best-effort removal of every leftover whose run tag satisfies `doomed`.
fn remove_matching(doomed: impl Fn(&str) -> bool) {
    // Links before namespaces, for the same reason as in `Net::teardown`.
    if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
        for name in dir.flatten().filter_map(|e| e.file_name().into_string().ok()) {
            if split_link(&name).is_some_and(|(tag, _)| doomed(tag)) {
                let _ = run(&["ip", "link", "del", &name]);
            }
        }
    }
    if let Ok(list) = run(&["ip", "netns", "list"]) {
        // Lines look like "name (id: 3)".
        for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if split_ns(ns).is_some_and(&doomed) {
                let _ = run(&["ip", "netns", "del", ns]);
            }
        }
    }
    // The rules outlive their bridge, so they are found by listing rather than by surviving bridges.
    if Path::new(BRIDGE_NF).exists() {
        if let Ok(rules) = run(&["iptables", "-w", "-S", "FORWARD"]) {
            for rule in rules.lines() {
                let words: Vec<&str> = rule.split_whitespace().collect();
                if let ["-A", "FORWARD", "-i", i, "-o", o, "-j", "ACCEPT"] = words[..] {
                    if i == o && split_link(i).is_some_and(|(tag, bridge)| bridge && doomed(tag)) {
                        let _ = run(&forward_rule("-D", i));
                    }
                }
            }
        }
    }
}

fn forward_rule<'a>(op: &'a str, bridge: &'a str) -> [&'a str; 10] {
    ["iptables", "-w", op, "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
}

/// The run tag of a namespace name "<tag>-n<i>".
fn split_ns(name: &str) -> Option<&str> {
    let (tag, i) = name.rsplit_once("-n")?;
    is_digits(i).then_some(tag)
}

/// The run tag of a link name, and whether it is the bridge ("<tag>b") rather than a veth ("<tag>v<i>").
fn split_link(name: &str) -> Option<(&str, bool)> {
    if let Some(tag) = name.strip_suffix('b') {
        return Some((tag, true));
    }
    let (tag, i) = name.rsplit_once('v')?;
    is_digits(i).then_some((tag, false))
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

fn on_path(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|dir| dir.join(prog).metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
    })
}

fn report(result: Result<String>) {
    if let Err(e) = result {
        eprintln!("chaos net teardown: {e:#}");
    }
}

/// Runs argv, returning stdout; the error names the command line and carries its stderr.
fn run(argv: &[&str]) -> Result<String> {
    let line = argv.join(" ");
    let (prog, args) = argv.split_first().context("empty command")?;
    let out = Command::new(prog).args(args).output().with_context(|| format!("cannot run `{line}`"))?;
    if !out.status.success() {
        bail!("`{line}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether slot `from` reaches `to`, or None when the host has no tool to probe with.
    fn reachable(net: &Net, from: usize, to: Ipv4Addr) -> Option<bool> {
        let to = to.to_string();
        let mut argv = net.exec_prefix(from);
        if on_path("ping") {
            argv.extend(["ping", "-c1", "-W1", &to].map(String::from));
            return Some(Command::new(&argv[0]).args(&argv[1..]).output().ok()?.status.success());
        }
        if on_path("bash") && on_path("timeout") {
            // A refused connection to a closed port proves the RST came back, so no listener is needed.
            argv.extend(["timeout", "2", "bash", "-c", &format!("exec 3<>/dev/tcp/{to}/9")].map(String::from));
            let out = Command::new(&argv[0]).args(&argv[1..]).output().ok()?;
            return Some(String::from_utf8_lossy(&out.stderr).contains("refused"));
        }
        None
    }

    #[test]
    fn cut_and_heal() {
        if let Err(why) = Net::available() {
            eprintln!("skipping network namespace test: {why}");
            return;
        }
        let pid = std::process::id();
        let subnet = (pid % 200 + 20) as u8;
        let mut net = Net::create(&format!("lt{}", pid % 100_000), subnet, 3).expect("create");
        assert_eq!(net.addr(2), Ipv4Addr::new(10, 213, subnet, 3));
        assert_eq!(net.exec_prefix(1)[3], net.namespace(1));

        net.cut(0, 1).expect("cut");
        net.cut(1, 0).expect("cut again");
        assert_eq!(net.cut_pairs(), vec![(0, 1)]);
        let (a1, a2, gw) = (net.addr(1), net.addr(2), net.gateway());
        match reachable(&net, 0, a1) {
            None => eprintln!("skipping reachability checks: neither ping nor bash+timeout found"),
            Some(r01) => {
                assert!(!r01, "0 reaches 1 across a cut");
                assert_eq!(reachable(&net, 1, net.addr(0)), Some(false), "1 reaches 0 across a cut");
                assert_eq!(reachable(&net, 0, a2), Some(true), "0 cannot reach 2");
                assert_eq!(reachable(&net, 0, gw), Some(true), "0 cannot reach the bridge");
                assert_eq!(reachable(&net, 1, gw), Some(true), "1 cannot reach the bridge");
                net.heal_all().expect("heal");
                assert_eq!(reachable(&net, 0, a1), Some(true), "0 cannot reach 1 after heal");
            }
        }
        net.heal_all().expect("heal");
        assert!(net.cut_pairs().is_empty());

        let (ns0, bridge) = (net.namespace(0).to_string(), net.bridge.clone());
        net.teardown();
        assert!(!Path::new(NETNS_DIR).join(ns0).exists());
        assert!(!link_exists(&bridge));
    }
}
