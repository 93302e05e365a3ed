#!/usr/bin/env python3
"""Tests of bench/gpu/stage_roofline.py against independent expectations: the stages'
FLOP add up to the per-pass totals stated in docs/gpu-delta-backward-speed-history.md (forward
2C²(3K+2V) + 6CKV, backward 22C²K + 10C²V + 16CKV + 4C³ per chunk); one stage's traffic
counted by hand; a stage log's medians; a stage run at its floor; bad arguments exit 2."""
import contextlib
import io
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu"))
import stage_roofline as sr  # noqa: E402

C = 64


class StageRoofline(unittest.TestCase):
    def test_stage_flop_add_up_to_the_pass_totals(self):
        for K, V in ((128, 128), (64, 32), (16, 112)):
            m = sr.stage_model(K, V, 2)
            fwd = sum(f for (p, _), (f, _, _) in m.items() if p == "forward")
            bwd = sum(f for (p, _), (f, _, _) in m.items() if p == "backward")
            self.assertEqual(fwd, 2 * C * C * (3 * K + 2 * V) + 6 * C * K * V, (K, V))
            self.assertEqual(bwd, 22 * C * C * K + 10 * C * C * V + 16 * C * K * V + 4 * C**3, (K, V))

    def test_prep_traffic_by_hand(self):
        # bf16, K = V = 16: q and k rows (2 · 64 · 16 · 2 B) and the fp32 gates (64 · 4 B) in;
        # M (64 · 64 · 2 B) and Q ⊙ e^b (64 · 16 · 2 B) out.
        _, rd, wr = sr.stage_model(16, 16, 2)[("backward", "prep")]
        self.assertEqual((rd, wr), (4096 + 256, 8192 + 2048))
        # dqkwg at K = V = 16 reads dO, Δ, dΔ (3 · 64 · 16 · e), dH (16 · 16 · e), q and the write
        # keys (2 · 64 · 16 · e), S_0 as stored (16 · 16 · e), the gates (64 · 4) and one column
        # tile's row sums (16 · 4).
        _, rd16, _ = sr.stage_model(16, 16, 2)[("backward", "dqkwg")]
        _, rd32, _ = sr.stage_model(16, 16, 4)[("backward", "dqkwg")]
        self.assertEqual(rd16, 6144 + 512 + 4096 + 512 + 256 + 64)
        self.assertEqual(rd32, 12288 + 1024 + 8192 + 1024 + 256 + 64)
        # The backward's recomputing state pass writes what the forward's does: Δ (64 · 16 · e) and
        # the chunk-initial state once, narrowed (16 · 16 · e; no fp32 copy beside it since
        # the gate term reads the narrowed state, docs/arithmetic-policies.md).
        for e in (2, 4):
            self.assertEqual(sr.stage_model(16, 16, e)[("backward", "state_pass")][2], 64 * 16 * e + 16 * 16 * e)
            self.assertEqual(sr.stage_model(16, 16, e)[("forward", "state_pass")][2], 64 * 16 * e + 16 * 16 * e)

    def test_stage_log_medians(self):
        log = ("stage ms: ut_transform 0.5 state_pass 0.6 output 0.2\n"
               "stage ms: ut_transform 0.7 state_pass 0.6 output 0.4\n"
               "stage ms: ut_transform 0.9 state_pass 0.6 output 0.3\n"
               "noise line\n"
               "stage ms: ut_transform 1.0 state_pass 2.0 prep 0.1 dstate_pass 0.8 dqkwg 1.0 wy 1.0 finish 0.0\n")
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write(log)
        try:
            t = sr.parse_stage_logs([fh.name])
        finally:
            os.unlink(fh.name)
        self.assertEqual(t[("forward", "ut_transform")], 0.7)
        self.assertEqual(t[("forward", "output")], 0.3)
        self.assertEqual(t[("backward", "ut_transform")], 1.0)
        self.assertEqual(t[("backward", "prep")], 0.1)

    def test_ceilings_from_the_fla_comparison(self):
        out = 'warming up\n{"device": "X", "ceiling_bf16_tflops": 692.5, "ceiling_copy_gbs": 4264.0}\nceilings: ...\n'
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write(out)
        try:
            self.assertEqual(sr.ceilings_from(fh.name), (692.5, 4264.0))
        finally:
            os.unlink(fh.name)

    def test_a_stage_at_its_floor(self):
        B, T, H, K, V = 1, 64, 1, 16, 16
        _, rd, wr = sr.stage_model(K, V, 2)[("backward", "prep")]
        gbs = 1000.0
        floor_ms = (rd + wr) / (gbs * 1e9) * 1e3  # prep is memory-bound at any sane ceiling
        rows = sr.table((B, T, H, K, V), "bf16", 1000.0, gbs, {("backward", "prep"): floor_ms})
        (prep,) = [r for r in rows if r["stage"] == "prep"]
        self.assertAlmostEqual(prep["floor"], floor_ms)
        self.assertEqual(prep["bound"], "memory")
        text = "\n".join(sr.render(rows, 1000.0, gbs, False, ""))
        line = next(l for l in text.splitlines() if l.startswith("backward  prep"))
        self.assertIn("1.00  reached", line)
        self.assertIn("100.0 %", line)  # GB/s at the copy ceiling

    def test_bad_arguments_exit_2(self):
        for argv in (["--shape", "1", "64", "1", "20", "16", "--ceilings", "1", "1"],      # K not a multiple of 16
                     ["--shape", "1", "64", "1", "16", "16", "--ceilings", "0", "1"],      # a zero ceiling
                     ["--shape", "1", "64", "1", "16", "16", "--ceilings", "1", "1", "--stage", "backward.nope=1"]):
            with self.assertRaises(SystemExit) as cm, contextlib.redirect_stderr(io.StringIO()):
                sr.main(argv)
            self.assertEqual(cm.exception.code, 2, argv)


if __name__ == "__main__":
    unittest.main()
