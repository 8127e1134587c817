#!/usr/bin/python3
"""mkman.py TUNABLES_TOOL TEMPLATE OUTPUT [KEY=VALUE...] - writes the man page pcpmalloc.1.

The ENVIRONMENT section's list of PCPMALLOC_* variables is made from what TUNABLES_TOOL
(build/core/pcpmalloc-tunables) prints, the Markdown table that README.md carries and that
test/unit/check_readme.sh checks: one table in the code, two documents.  @TUNABLES@ in the
template becomes that list, @KEY@ becomes VALUE."""
import subprocess
import sys


def roff(text):
    """Markdown cell -> roff text: backslashes, leading dots and quotes escaped."""
    text = text.replace('\\|', '|').replace('\\', '\\e').replace('-', '\\-')
    text = text.replace('`', '')
    if text.startswith(('.', "'")):
        text = '\\&' + text
    return text


def entries(table):
    rows = [l for l in table.splitlines() if l.startswith('| `PCPMALLOC_')]
    if not rows:
        sys.exit('mkman.py: the tunables tool printed no PCPMALLOC_* row')
    out = []
    for r in rows:
        # '| `NAME` | default | values | meaning |'; values may hold escaped '\|'
        cells = [c.strip() for c in r.strip().strip('|').replace('\\|', '\0').split('|')]
        cells = [c.replace('\0', '\\|') for c in cells]
        if len(cells) != 4:
            sys.exit(f'mkman.py: cannot read the row {r!r}')
        name, deflt, values, meaning = cells
        out += ['.TP', '.B ' + roff(name),
                roff(meaning) + '.',
                '.br',
                f'Default: {roff(deflt)}; values: {roff(values)}.']
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tool, template, output = sys.argv[1:4]
    table = subprocess.run([tool], check=True, capture_output=True, text=True).stdout
    text = open(template).read()
    for kv in sys.argv[4:]:
        k, _, v = kv.partition('=')
        text = text.replace('@' + k + '@', v)
    text = text.replace('@TUNABLES@', '\n'.join(entries(table)))
    with open(output, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
