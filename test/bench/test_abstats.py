#!/usr/bin/python3
# test_abstats.py - the statistics of pcpmalloc-ab on samples with known answers.
# Usage: test_abstats.py DIR_WITH_abstats.py
import math
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else '.')
import abstats as s  # noqa: E402


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


class Summaries(unittest.TestCase):
    def test_hmean(self):
        self.assertAlmostEqual(s.hmean([1, 2, 4]), 12 / 7)          # 3 / (1 + 1/2 + 1/4)
        self.assertAlmostEqual(s.hmean([2, 2, 2, 2]), 2.0)
        self.assertAlmostEqual(s.hmean([40, 60]), 48.0)             # the average-speed example
        self.assertEqual(s.hmean([0, 5]), 0.0)

    def test_stddev_median_min(self):
        # 2 4 4 4 5 5 7 9: population sd 2, sample sd sqrt(32/7)
        x = [2, 4, 4, 4, 5, 5, 7, 9]
        self.assertAlmostEqual(s.stddev(x), math.sqrt(32 / 7))
        self.assertEqual(s.median(x), 4.5)
        self.assertEqual(s.median([3, 1, 2]), 2)
        self.assertEqual(s.stddev([5.0]), 0.0)
        sm = s.summary(x)
        self.assertEqual((sm['n'], sm['min'], sm['max'], sm['mean']), (8, 2, 9, 5))

    def test_gmean(self):
        self.assertAlmostEqual(s.gmean([1, 4, 16]), 4.0)
        self.assertAlmostEqual(s.gmean([0.5, 2.0]), 1.0)

    def test_pct_gain(self):
        self.assertAlmostEqual(s.pct_gain(10.0, 8.0), 20.0)        # less time: +20 %
        self.assertAlmostEqual(s.pct_gain(10.0, 12.0), -20.0)
        self.assertAlmostEqual(s.pct_gain(100.0, 150.0, higher_is_better=True), 50.0)
        self.assertTrue(math.isnan(s.pct_gain(0.0, 1.0)))


class StudentT(unittest.TestCase):
    def test_critical_values(self):
        # two-sided 95 % critical values from the t table: p must be 0.05
        for t, df in ((12.706, 1), (4.303, 2), (2.776, 4), (2.571, 5), (2.228, 10),
                      (2.086, 20), (2.042, 30), (1.984, 100)):
            self.assertAlmostEqual(s.t_sf2(t, df), 0.05, delta=2e-4, msg=f't={t} df={df}')
        # 99 %: df 10 -> 3.169
        self.assertAlmostEqual(s.t_sf2(3.169, 10), 0.01, delta=1e-4)
        self.assertEqual(s.t_sf2(0.0, 7), 1.0)
        # df = 1 is the Cauchy distribution: P(|T| > 1) = 1/2 exactly
        self.assertAlmostEqual(s.t_sf2(1.0, 1), 0.5, places=12)

    def test_against_integration(self):
        # Simpson integration of the t density, independent of the incomplete beta code
        def sf2(t, df):
            c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
            f = lambda x: c * (1 + x * x / df) ** (-(df + 1) / 2)  # noqa: E731
            n = 20000
            h = t / n
            acc = f(0) + f(t) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n))
            return 1 - 2 * acc * h / 3
        for t, df in ((0.5, 3), (1.7, 5.5), (2.9, 12.25), (4.0, 40)):
            self.assertAlmostEqual(s.t_sf2(t, df), sf2(t, df), places=7)


class Welch(unittest.TestCase):
    def test_known_samples(self):
        # a = 1..5 (mean 3, var 2.5), b = 2,4..10 (mean 6, var 10):
        # t = -3 / sqrt(0.5 + 2) = -1.8974, df = 2.5^2 / (0.25/4 + 4/4) = 5.8824
        t, df, p, sig = s.welch([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
        self.assertAlmostEqual(t, -3 / math.sqrt(2.5), places=12)
        self.assertAlmostEqual(df, 6.25 / 1.0625, places=12)
        self.assertAlmostEqual(p, 0.1075, delta=5e-4)
        self.assertFalse(sig)

    def test_significant(self):
        a = [10.1, 10.3, 9.9, 10.0, 10.2]
        b = [11.0, 11.2, 10.9, 11.1, 11.3]
        t, df, p, sig = s.welch(a, b)
        # means 10.1 and 11.1, both variances 0.025: t = -1 / sqrt(0.01) = -10, df = 8
        self.assertAlmostEqual(t, -10.0, places=9)
        self.assertAlmostEqual(df, 8.0, places=9)
        self.assertLess(p, 1e-5)
        self.assertTrue(sig)
        self.assertEqual(s.welch(b, a)[3], True)     # symmetric

    def test_borderline(self):
        # equal variances 1, n = 6 each: t = d / sqrt(2/6), df = 10; t 2.228 is the 95 % edge
        base = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
        sd = s.stddev(base)
        for d, want in ((2.3, True), (2.1, False)):
            shift = d * sd * math.sqrt(2 / 6)
            t, df, p, sig = s.welch(base, [x + shift for x in base])
            self.assertAlmostEqual(df, 10.0, places=9)
            self.assertEqual(sig, want, msg=f't={t} p={p}')

    def test_degenerate(self):
        self.assertFalse(s.welch([1.0], [2.0, 3.0])[3])            # n = 1: no test
        self.assertTrue(math.isnan(s.welch([1.0], [2.0, 3.0])[2]))
        self.assertEqual(s.welch([2.0, 2.0], [2.0, 2.0])[2:], (1.0, False))
        self.assertEqual(s.welch([2.0, 2.0], [3.0, 3.0])[2:], (0.0, True))
        # one constant sample: df comes from the other one alone (n - 1)
        t, df, p, sig = s.welch([1.0, 1.0, 1.0], [2.0, 3.0, 4.0])
        self.assertAlmostEqual(df, 2.0)
        self.assertAlmostEqual(t, -2 / math.sqrt(1 / 3))


if __name__ == '__main__':
    unittest.main(verbosity=2)
