#!/usr/bin/python3
"""configure_script.py IN OUT [KEY=VALUE...] - writes the script IN as OUT with every @KEY@
replaced by VALUE, executable.  meson's configure_file() drops the executable bit; the
`pcpmalloc` command and pcpmalloc-ab are made with this instead, once for the build tree and
once for the installation (where the library and the workloads are)."""
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1:3]
    text = open(src).read()
    for kv in sys.argv[3:]:
        k, eq, v = kv.partition('=')
        if not eq:
            sys.exit(f'configure_script.py: {kv!r}: want KEY=VALUE')
        text = text.replace('@' + k + '@', v)
    tmp = dst + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


if __name__ == '__main__':
    main()
