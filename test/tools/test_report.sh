#!/usr/bin/env bash
# test_report.sh - pcpmalloc-ab's reports open for a person: a short real A/B run (wl-churn
# under glibc and pcpmalloc) with --html and --plot FILE.png; the HTML page is loaded in
# Debian's headless chromium, which takes a screenshot, and the screenshot must not be blank
# and must show the plot's bars in the two allocators' colours; the matplotlib PNG likewise.
# Skips (exit 77) only when no chromium is installed or it cannot start here.
# Usage: test_report.sh BUILDDIR
build=$(realpath "$1")
. "$(dirname "$0")/toolslib.sh"
here=$(dirname "$0")
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3)
# the plot's colours: glibc (first column) and pcpmalloc (second)
grey=777777 blue=1f77b4

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
	echo "SKIP: no chromium installed (Debian: apt-get install chromium; .ci/setup does)"
	exit 77
fi
shoot() { # html png: headless screenshot (root needs --no-sandbox); its stderr kept
	timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--no-first-run --user-data-dir="$tmp/profile" --window-size=1000,800 \
		--screenshot="$2" "file://$1" >"$tmp/chromium.log" 2>&1
}
echo '<html><body><p>probe</p></body></html>' >"$tmp/probe.html"
if ! shoot "$tmp/probe.html" "$tmp/probe.png" || [ ! -s "$tmp/probe.png" ]; then
	echo "SKIP: chromium ($browser) cannot run here:"
	tail -5 "$tmp/chromium.log"
	exit 77
fi

(cd "$tmp" && "$build/bench/pcpmalloc-ab" -q -a glibc -a pcpmalloc --workload churn --quick -n 2 -w 0 \
	--html "$tmp/report.html" --plot "$tmp/plot.png" >"$tmp/ab.out" 2>"$tmp/ab.err")
rc=$?
[ $rc = 0 ] || { fail "pcpmalloc-ab --html --plot: exit $rc"; cat "$tmp/ab.err"; finish; }
has "$tmp/report.html" "<table>" "the report's table" && has "$tmp/report.html" "<svg " "the report's plot" &&
	has "$tmp/report.html" "<td class=\"name\">wall \(s\)</td>" "the table's wall-time rows" &&
	ok "report.html holds the table and the plot"

if shoot "$tmp/report.html" "$tmp/shot.png"; then
	if "$py" "$here/png_check.py" "$tmp/shot.png" --ink 3 --colour $grey:300 --colour $blue:300 >"$tmp/shot.chk"; then
		ok "chromium's screenshot of the report: $(head -1 "$tmp/shot.chk" | cut -d: -f2-)"
	else
		fail "chromium's screenshot of the report:"
		cat "$tmp/shot.chk"
	fi
else
	fail "chromium could not load the report:"
	tail -5 "$tmp/chromium.log"
fi
if "$py" "$here/png_check.py" "$tmp/plot.png" --ink 3 --colour $grey:300 --colour $blue:300 >"$tmp/plot.chk"; then
	ok "--plot plot.png (matplotlib): $(head -1 "$tmp/plot.chk" | cut -d: -f2-)"
else
	fail "--plot plot.png:"
	cat "$tmp/plot.chk"
fi
finish
