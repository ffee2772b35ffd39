# Sourced by .ci/run (or by hand: CI_SERVICES=$(mktemp -d) . .ci/services/slurm.sh): a single-node Slurm
# (munge, slurmctld, slurmd) on this machine, state and logs under $CI_SERVICES/slurm. Exports SLURM_CONF and
# VAULT_TEST_SLURM=1; partition "debug". See ../shared/domain/SERVICES.md.
slurm_dir="$CI_SERVICES/slurm"
mkdir -p "$slurm_dir"/{state,spool,log} /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || su -s /bin/sh munge -c "munged --force" || munged --force
node=$(hostname -s)
cat > "$slurm_dir/slurm.conf" <<CONF
ClusterName=vaultci
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/log/slurmctld.log
SlurmdLogFile=$slurm_dir/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
MinJobAge=300
NodeName=$node CPUs=$(nproc) RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$slurm_dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 1 60); do
  sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break
  sleep 0.5
done
sinfo -h -o %t | grep -qE '^(idle|mix|alloc)' || { echo "ci: slurm did not come up" >&2; cat "$slurm_dir"/log/*.log >&2; return 1; }
cp "$slurm_dir/slurmctld.pid" "$CI_SERVICES/slurmctld.pid"
cp "$slurm_dir/slurmd.pid" "$CI_SERVICES/slurmd.pid"
export VAULT_TEST_SLURM=1
