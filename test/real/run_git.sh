#!/usr/bin/env bash
# git under pcpmalloc vs glibc: build a repository of a few hundred generated files over a
# series of commits (edits, additions, deletions, renames, a merged branch, an annotated tag),
# query it, gc it, fsck it and clone it.  Identities and dates are fixed, so every object id is
# the same in both runs; outputs that depend on delta choices (pack sizes) are not compared.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
real_init "$@"

NFILES=300
NCOMMITS=12
[[ $REAL_SIZE == long ]] && NFILES=2000 NCOMMITS=40

# Writes files for commit number $2 into the work tree $1: the first commit creates NFILES
# files, later ones edit, add, delete and rename some.  Deterministic for a given commit.
edit_tree() {
	python3 - "$1" "$2" "$NFILES" <<'PY'
import os, random, sys
root, commit, nfiles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(commit)
words = ["alloc", "free", "page", "zone", "batch", "high", "slab", "cache", "order", "buddy",
         "merge", "split", "count", "drain", "lock", "cpu", "node", "list", "pcp", "decay"]
def content(name, version):
    r = random.Random(name + str(version))
    lines = []
    for i in range(r.randint(5, 200)):
        text = " ".join(r.choice(words) for _ in range(r.randint(1, 12)))
        lines.append("%s line %d: %s\n" % (name, i, text))
    return "".join(lines)
def path(i):
    return os.path.join(root, "dir%02d" % (i % 12), "sub%d" % (i % 3), "file%04d.txt" % i)
existing = sorted(os.path.join(d, f) for d, _, files in os.walk(root)
                  if "/.git" not in d + "/" for f in files)
if commit == 0:
    targets = [path(i) for i in range(nfiles)]
elif commit >= 100:   # the topic branch only adds files of its own: the merge is clean
    targets = [os.path.join(root, "topic", "t%d-%d.txt" % (commit, i)) for i in range(20)]
else:
    targets = rng.sample(existing, min(len(existing), 25))
    targets += [path(nfiles + commit * 10 + i) for i in range(5)]
for p in targets:
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(content(os.path.relpath(p, root), commit))
if 0 < commit < 100:
    for p in rng.sample(existing, 3):
        if os.path.exists(p) and p not in targets:
            os.remove(p)
PY
}

workload() {
	export HOME="$REAL_WORK/home" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
	export GIT_AUTHOR_NAME="Real Test" GIT_AUTHOR_EMAIL=real@test.invalid
	export GIT_COMMITTER_NAME="Real Test" GIT_COMMITTER_EMAIL=real@test.invalid
	mkdir -p "$HOME"
	local c when
	commit_at() { # $1: commit number; sets both dates
		when="@$((1700000000 + $1 * 3600)) +0000"
		export GIT_AUTHOR_DATE="$when" GIT_COMMITTER_DATE="$when"
	}

	run git-build git init -q -b main repo
	cd repo
	for c in $(seq 0 "$NCOMMITS"); do
		edit_tree "$PWD" "$c"
		if ((c > 0 && c % 4 == 0)); then
			run git-build git mv "$(git ls-files | sed -n 2p)" "renamed-$c.txt"
		fi
		commit_at "$c"
		run git-build git add -A
		run git-build git commit -q -m "commit $c"
		if ((c == NCOMMITS / 2)); then
			run git-build git branch topic
		fi
	done
	run git-build git checkout -q topic
	for c in 101 102 103; do
		edit_tree "$PWD" "$c"
		commit_at "$c"
		run git-build git add -A
		run git-build git commit -q -m "topic $c"
	done
	run git-build git checkout -q main
	commit_at 200
	run git-build git merge -q --no-ff -m "merge topic" topic
	run git-build git tag -a v1 -m "tag v1"

	echo "== log"
	run git-query git log --format='%H %s' --all
	echo "== tree and tag"
	run git-query git rev-parse 'HEAD^{tree}' v1 'v1^{commit}'
	echo "== diff --stat HEAD~5"
	run git-query git diff --stat HEAD~5 HEAD
	echo "== log --stat -3 digest"
	run git-query git log --stat -3 | digest
	echo "== log -p digest"
	run git-query git log -p --all | digest
	echo "== grep"
	run git-query git grep -c 'zone' -- 'dir03/*' | digest
	echo "== blame"
	run git-query git blame -s "$(git ls-files | sed -n 50p)" | digest
	echo "== objects before gc"
	run git-query git cat-file --batch-all-objects --batch-check | sort | tee ../objects.before | digest
	wc -l <../objects.before

	echo "== gc"
	run -p 2 git-gc git gc -q
	run git-gc git count-objects -v | grep -E '^(count|in-pack|packs|prune-packable|garbage):'
	run git-gc git cat-file --batch-all-objects --batch-check | sort >../objects.after
	cmp ../objects.before ../objects.after && echo "objects after gc: same"
	run git-fsck git fsck --full --strict --no-progress
	echo "fsck: ok"

	echo "== clone"
	cd ..
	run -p 2 git-clone git clone -q --no-local repo clone
	run git-clone git -C clone log --format='%H %s' | digest
	run git-clone git -C clone fsck --full --strict --no-progress
	run git-clone git -C clone status --porcelain
	echo "clone: ok"
}
real_compare workload
