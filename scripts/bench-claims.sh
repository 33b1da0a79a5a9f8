#!/usr/bin/env bash
# Claims/s and commit latency of Raft-committed segment claims on a local 3-node cluster
# (loopback HTTP, sled with fdatasync) at 1, 4 and 16 concurrent claimers; then, with one
# claimer, where a claim's time goes (the claimer on the leader or on a follower, the followers
# in processes of their own, one node, fsync off); and, in the same run, the baselines:
#   - Leaf's own claim on MariaDB (Debian's mariadb-server, a private instance with
#     sync_binlog=1 and innodb_flush_log_at_trx_commit=1, on the same disk): one client doing
#     BEGIN; UPDATE leaf_alloc SET max_id = max_id + step ...; SELECT ...; COMMIT, one at a time
#     (the bar); then the same on a replicated MariaDB: a primary and two replicas with
#     lossless semi-synchronous replication, as a 3-node leafraft replicates (with the replicas
#     syncing their relay log before they acknowledge, and with MariaDB's default of not syncing);
#   - the same claim as a compare-and-swap transaction on a local 3-member etcd (`docs/bars.md`).
# Each baseline missing (and not installable without root) is skipped with a message.
# Usage: scripts/bench-claims.sh [--duration-secs S]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=5
[ "${1:-}" = "--duration-secs" ] && duration=$2

cargo build --release --quiet -p leafraft -p leafraft-tools
bin=./target/release/leafraft
bench=./target/release/leafraft-bench
"$bench" claims --nodes 3 --concurrency 1,4,16 --duration-secs "$duration"
echo "== where one claimer's time goes"
# "one node per process": the followers are `leafraft serve` processes, as deployed (the other
# rows run every node in the bench's process, where they share sled's process-wide lock).
for placement in "--nodes 3 --claimers-on followers" "--nodes 3 --claimers-on leader" \
  "--nodes 3 --claimers-on leader --followers-in-processes" "--nodes 1 --claimers-on leader"; do
  for fsync in true false; do
    printf "%-60s fsync=%-5s " "$placement" "$fsync"
    # shellcheck disable=SC2086
    "$bench" claims $placement --fsync "$fsync" --concurrency 1 --duration-secs "$duration" | tail -1
  done
done

# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh

# Starts private mariadbd number $1 (its data, socket and log under $work) on loopback port $2,
# with the binlog synced on every commit and InnoDB's redo log flushed on every commit; the rest of
# the arguments are added to its command line.
mariadb_start() {
  local id=$1 port=$2
  shift 2
  mariadb-install-db --no-defaults --datadir="$work/db$id" --user=root --auth-root-authentication-method=normal \
    >"$work/db$id-install.log" 2>&1
  mariadbd --no-defaults --datadir="$work/db$id" --socket="$work/db$id.sock" --port="$port" --bind-address=127.0.0.1 \
    --user=root --server-id="$id" --log-bin="$work/db$id/binlog" --sync-binlog=1 --innodb-flush-log-at-trx-commit=1 \
    "$@" >"$work/db$id.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do mariadb_sql "$id" -e "SELECT 1" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "mariadbd $id did not start:" && tail -5 "$work/db$id.log" && return 1
}
mariadb_sql() { local id=$1; shift; mariadb --no-defaults -S "$work/db$id.sock" -u root "$@"; }
# Stops every server started so far, so that idle ones take no CPU from the next measurement.
mariadb_stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

# One client doing Leaf's claim on mariadbd $1, $((duration * 2000)) times one after another.
mariadb_claims() {
  local id=$1 n=$((duration * 2000)) t0 t1
  # Leaf's table (scripts/leaf_alloc.sql in Leaf) and one tag.
  mariadb_sql "$id" -e "CREATE DATABASE leaf; CREATE TABLE leaf.leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '',
    max_id bigint NOT NULL DEFAULT 1, step int NOT NULL, description varchar(256) DEFAULT NULL,
    update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag))
    ENGINE=InnoDB; INSERT INTO leaf.leaf_alloc (biz_tag, max_id, step) VALUES ('bench', 1, 1000);"
  for _ in $(seq 1 "$n"); do
    echo "BEGIN; UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 'bench';"
    echo "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = 'bench'; COMMIT;"
  done >"$work/claims.sql"
  t0=$(date +%s.%N)
  mariadb_sql "$id" leaf <"$work/claims.sql" >/dev/null
  t1=$(date +%s.%N)
  python3 -c "print('  %d claims in %.2f s: %.0f claims/s (a mean of %.0f µs each)' % ($n, $t1 - $t0, $n / ($t1 - $t0), ($t1 - $t0) / $n * 1e6))"
}

mariadb_baseline() {
  if ! command -v mariadbd >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null 2>&1 || true
  fi
  if ! command -v mariadbd >/dev/null 2>&1; then
    echo "MariaDB baseline skipped: install Debian's mariadb-server to run it"
    return
  fi
  # One server, as the bar has it: nothing is replicated.
  mariadb_start 1 "$(free_port)" --skip-networking
  echo "MariaDB $(mariadb_sql 1 -N -e "SELECT VERSION()"), sync_binlog=1, innodb_flush_log_at_trx_commit=1, one client:"
  mariadb_claims 1
  mariadb_stop

  # A replicated MySQL, as Leaf runs in production and as a 3-node leafraft is: a primary and two
  # replicas with semi-synchronous replication, the commit waiting for one replica's
  # acknowledgement (a majority of three, as in Raft). AFTER_SYNC is the lossless wait point (the
  # commit is not visible before a replica has it). With sync_relay_log=1 a replica acknowledges
  # only what it has synced, as a leafraft follower does; the second figure (sync_relay_log=0)
  # is MariaDB's default, where the acknowledged copy may sit in the replica's page cache.
  local sync_relay
  for sync_relay in 1 0; do
    local base=$((10 + sync_relay * 10)) primary_port
    primary_port=$(free_port)
    mariadb_start "$base" "$primary_port" --rpl-semi-sync-master-enabled=ON \
      --rpl-semi-sync-master-wait-point=AFTER_SYNC --rpl-semi-sync-master-timeout=60000
    mariadb_sql "$base" -e "CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
      GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';"
    for replica in $((base + 1)) $((base + 2)); do
      mariadb_start "$replica" "$(free_port)" --rpl-semi-sync-slave-enabled=ON --sync-relay-log="$sync_relay" \
        --relay-log="$work/db$replica/relay"
      mariadb_sql "$replica" -e "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary_port,
        MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos; START SLAVE;"
    done
    for _ in $(seq 1 200); do
      [ "$(mariadb_sql "$base" -N -e "SHOW STATUS LIKE 'Rpl_semi_sync_master_clients'" | cut -f2)" = 2 ] && break
      sleep 0.05
    done
    local before after
    before=$(mariadb_sql "$base" -N -e "SHOW STATUS LIKE 'Rpl_semi_sync_master_no_tx'" | cut -f2)
    echo "MariaDB, a primary and 2 semi-synchronous replicas (AFTER_SYNC, sync_relay_log=$sync_relay), one client:"
    mariadb_claims "$base"
    after=$(mariadb_sql "$base" -N -e "SHOW STATUS LIKE 'Rpl_semi_sync_master_no_tx'" | cut -f2)
    # A commit that timed out waiting for a replica would have gone through unreplicated.
    [ "$before" = "$after" ] || echo "  ($((after - before)) commits were not acknowledged by a replica)"
    mariadb_stop
  done
}
mariadb_baseline

if ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null 2>&1 || true
  fi
fi
if ! command -v etcd >/dev/null 2>&1; then
  echo "etcd baseline skipped: install Debian's etcd-server to run it"
  exit 0
fi

client=() peer=()
for i in 1 2 3; do client+=("$(free_port)"); peer+=("$(free_port)"); done
initial="e1=http://127.0.0.1:${peer[0]},e2=http://127.0.0.1:${peer[1]},e3=http://127.0.0.1:${peer[2]}"
for i in 0 1 2; do
  etcd --name "e$((i+1))" --data-dir "$work/e$((i+1))" \
    --listen-client-urls "http://127.0.0.1:${client[$i]}" --advertise-client-urls "http://127.0.0.1:${client[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peer[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peer[$i]}" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token leafraft-bench \
    >"$work/e$((i+1)).log" 2>&1 &
  pids+=($!)
done
for port in "${client[@]}"; do
  for _ in $(seq 1 200); do curl -sf "127.0.0.1:$port/health" | grep -q true && break; sleep 0.05; done
done
echo "etcd $(etcd --version | head -1 | awk '{print $3}'), 3 members on loopback (fsync on, as always in etcd):"
"$bench" etcd-claims --concurrency 1,4,16 --duration-secs "$duration" \
  --endpoint "http://127.0.0.1:${client[0]},http://127.0.0.1:${client[1]},http://127.0.0.1:${client[2]}"
