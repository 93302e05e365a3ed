#!/usr/bin/env python3
"""Tests of bench/gpu/ncu_hotspots.py on hand-written CSV pages in the layouts it reads:
the SASS view's samples summed by opcode and ranked by instruction, per kernel; the CUDA
view's per-line samples under a 'File Name' or 'File Path' row; a CUDA view without
metric columns (what the lent machine's ncu returned) said so; a missing file exits 2."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu"))
import ncu_hotspots as nh  # noqa: E402

SASS = '''"Kernel Name","wy"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"00007f00","LDG.E R2, desc[UR4][R4.64]","600","10"
"00007f10","@!P0 LDG.E.64 R6, desc[UR4][R8.64]","200","10"
"00007f20","HMMA.16816.F32.BF16 R10, R12, R14, R10","150","40"
"00007f30","BAR.SYNC.DEFER_BLOCKING 0x0","50","5"
"Kernel Name","state_pass"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"00008000","LDSM.16.M88.4 R20, [R3]","30","8"
"00008010","HMMA.16816.F32.BF16 R10, R20, R14, R10","10","8"
'''

CUDA = '''"File Name","/src/gpu/family/wy.cuh"
"Line No","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"10","  const float x = a[i];","75","70"
"11","  b[i] = x;","25","20"
"12","","",""
'''

CUDA_TEXT_ONLY = '''"File Name","/src/gpu/family/wy.cuh"
"Line No","Source"
"1","// a comment"
'''


def run(fn, text, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(text)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fn(f.name, *args)
        return out.getvalue()
    finally:
        os.unlink(f.name)


class NcuHotspots(unittest.TestCase):
    def test_sass_view_by_opcode_and_instruction(self):
        out = run(nh.sass_hotspots, SASS, 2)
        wy, sp = out.split("== state_pass")
        # wy: 1000 samples; LDG 800 (both loads, the predicate and modifiers dropped), HMMA 150, BAR 50.
        self.assertIn("(1000 in all): LDG 80.0%, HMMA 15.0%, BAR 5.0%", wy)
        lines = [l for l in wy.splitlines() if "%  " in l]
        self.assertEqual(len(lines), 2)  # top 2
        self.assertIn("60.0%  00007f00  LDG.E R2", lines[0])
        self.assertIn("20.0%  00007f10  @!P0 LDG.E.64", lines[1])
        self.assertIn("(40 in all): LDSM 75.0%, HMMA 25.0%", sp)

    def test_cuda_view_lines(self):
        out = run(nh.source_hotspots, CUDA, 5)
        self.assertIn("75.0%", out)
        self.assertIn("wy.cuh:10", out)
        self.assertIn("25.0%", out)
        self.assertNotIn("wy.cuh:12", out.split("(top")[1].split("wy.cuh:11")[1])

    def test_cuda_view_without_metrics_says_so(self):
        self.assertIn("carried no metric columns", run(nh.source_hotspots, CUDA_TEXT_ONLY, 5))

    def test_opcode(self):
        self.assertEqual(nh.opcode("@!P0 LDG.E.64 R6, [R8]"), "LDG")
        self.assertEqual(nh.opcode("HMMA.16816.F32.BF16 R1, R2, R3, R1"), "HMMA")
        self.assertEqual(nh.opcode(""), "?")

    def test_missing_file_exits_2(self):
        sys_argv = sys.argv
        sys.argv = ["ncu_hotspots.py", "/nonexistent/source.csv"]
        try:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(nh.main(), 2)
            self.assertIn("'/nonexistent/source.csv' is not a file", err.getvalue())
        finally:
            sys.argv = sys_argv


if __name__ == "__main__":
    unittest.main()
