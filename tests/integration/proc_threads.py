"""What /proc says about all the threads of a process (tests and benches)."""
import glob


def voluntary_switches(pid):
    """Voluntary context switches of all of pid's threads (each sleep that ended is one)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except (OSError, ValueError):
            pass  # a thread that exited meanwhile
    return total
