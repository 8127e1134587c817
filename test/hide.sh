#!/usr/bin/env bash
# hide.sh VARIANT CMD [ARGS...] - runs CMD on this machine with one resource taken away, as
# machines without it are (issue 21: a test suite that passes wherever the README runs):
#   none       nothing hidden
#   cacheinfo  no /sys/devices/system/cpu/cpu*/cache (a VM whose kernel exports no cacheinfo)
#   numa       no /sys/devices/system/node (a kernel without NUMA)
#   sys        an empty /sys (a container without sysfs)
#   proc       an empty /proc (a container without procfs)
#   one-cpu    one CPU: taskset to the first CPU of the affinity mask
#   no-rseq    no rseq area registered (GLIBC_TUNABLES=glibc.pthread.rseq=0, as an older glibc)
#   no-thp     transparent huge pages off for the process (prctl PR_SET_THP_DISABLE)
# The file system variants bind-mount an empty folder over the path in a private mount
# namespace of an unprivileged user namespace (unshare -rm): nothing outside the command sees
# it.  Exit 77 (skip) when this machine cannot hide the resource that way.
set -u
variant=$1
shift
skip() { echo "skip: cannot hide '$variant' here: $1" >&2; exit 77; }

# mounts PATH... over with an empty folder inside a new namespace, then runs the command
in_namespace() {
	unshare -rm true 2>/dev/null || skip "no user and mount namespaces (unshare -rm)"
	local script='set -e; e=$(mktemp -d); while [ "$1" != -- ]; do mount $MOPT "$e" "$1" 2>/dev/null || mount $MOPT "$1" "$1"; shift; done; shift; exec "$@"'
	exec unshare -rm env MOPT="$MOPT" bash -c "$script" hide "$@"
}

case "$variant" in
none) exec "$@" ;;
cacheinfo)
	set -- /sys/devices/system/cpu/cpu[0-9]*/cache -- "$@"
	[ -d "$1" ] || skip "this machine has no sysfs cacheinfo already"
	MOPT=--bind in_namespace "$@" ;;
numa)
	[ -d /sys/devices/system/node ] || skip "no /sys/devices/system/node already"
	MOPT=--bind in_namespace /sys/devices/system/node -- "$@" ;;
sys) MOPT=--bind in_namespace /sys -- "$@" ;;
proc) MOPT=--bind in_namespace /proc -- "$@" ;;
one-cpu)
	command -v taskset >/dev/null || skip "no taskset"
	cpu=$(taskset -cp $$ | sed 's/.*: //; s/[-,].*//')
	exec taskset -c "$cpu" "$@" ;;
no-rseq) GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.pthread.rseq=0 exec "$@" ;;
no-thp)
	# PR_SET_THP_DISABLE (41) is inherited across fork and kept across execve
	exec python3 -c 'import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0) != 0:
    sys.exit(77)
os.execvp(sys.argv[1], sys.argv[1:])' "$@" ;;
*) echo "hide.sh: unknown variant '$variant'" >&2; exit 2 ;;
esac
