#!/bin/bash
# Long runs on SLURM: the rollout-nodes in one job, the learner in another that
# attaches to them once they run (--dependency=after). Learners can then be
# replaced, or added, without stopping the nodes: the envs wait for the next
# learner and lose no step (docs/protocol.md). Run it on a login node:
#
#   examples/slurm/rollout-long.sh [sbatch options for the nodes job]
#   examples/slurm/rollout-long.sh --nodes=16 --time=2-00:00:00
#
# It submits examples/slurm/rollout.sbatch twice, with the settings described
# there (ROLLOUT_* environment variables; both jobs get the same ones), and
# prints the two job ids:
#
#   nodes job: 1234
#   learner job: 1235
#
# ROLLOUT_LEARNER_SBATCH: sbatch options for the learner job (default
# "--nodes=1 --ntasks=1"; e.g. add "--partition=gpu --gres=gpu:1").
#
# Run it from a directory on a file system every machine sees: the run
# directory, rollout-NODESJOB, is made there. Another learner for the same
# nodes, submitted from the same directory:
#
#   sbatch --nodes=1 --ntasks=1 --export=ALL,ROLLOUT_ROLE=learner,ROLLOUT_NODES_JOB=1234 \
#       examples/slurm/rollout.sbatch
#
# Stop the run with `scancel 1234`: each node finishes its step in flight and
# writes its summary (rollout-1234/node-T.json); the learners then finish too.
set -euo pipefail
script=$(dirname "$(readlink -f "$0")")/rollout.sbatch

nodes=$(sbatch --parsable --export=ALL,ROLLOUT_ROLE=nodes "$@" "$script")
nodes=${nodes%%;*} # --parsable prints "ID" or "ID;CLUSTER"
echo "nodes job: $nodes"
read -ra learner_opts <<<"${ROLLOUT_LEARNER_SBATCH:---nodes=1 --ntasks=1}"
learner=$(sbatch --parsable --dependency="after:$nodes" "${learner_opts[@]}" \
  --export=ALL,ROLLOUT_ROLE=learner,ROLLOUT_NODES_JOB="$nodes" "$script")
echo "learner job: ${learner%%;*}"
