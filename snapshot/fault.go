package snapshot

// FaultEnv names the environment variable that makes a seal exit the process
// right after the named step (stage, write-tree, commit-tree, update-ref,
// position, ledger; the in-process engine's blob-written, tree-written,
// commit-written, pack-written, packs-merged, ref-locked, ref-renamed): crash-safety tests use it to kill a seal at every point. Only a
// binary built with -tags cairnfault reads it (fault_on.go); the shipped one
// never exits on an environment variable (fault_off.go).
const FaultEnv = "CAIRN_FAULT_AFTER"

// FaultExitCode is the exit code of a process stopped by FaultEnv.
const FaultExitCode = 86
