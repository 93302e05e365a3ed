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


# nvdisasm -gi -c of two functions: `other` first, with the same first opcode as `wy`, so
# that only the whole sequence tells them apart; in `wy` the first load is an inlined call
# (tile.cuh:7 inside wy.cuh:40), the second load and the HMMA share wy.cuh:41 (the HMMA
# has no comment of its own), a NOP pads the end.
LISTING = """\t.section\t.text._Z5otherv,"ax",@progbits
        /*0000*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0010*/                   EXIT ;
\t.section\t.text._Z2wyv,"ax",@progbits
_Z2wyv:
\t//## File "/src/gpu/core/tile.cuh", line 7 inlined at "/src/gpu/family/wy.cuh", line 40
\t//## File "/src/gpu/family/wy.cuh", line 40
        /*0000*/                   LDG.E R2, desc[UR4][R4.64] ;
\t//## File "/src/gpu/family/wy.cuh", line 41
        /*0010*/              @!P0 LDG.E.64 R6, desc[UR4][R8.64] ;
        /*0020*/                   HMMA.16816.F32.BF16 R10, R12, R14, R10 ;
.L_x_1:
\t//## File "/src/gpu/family/wy.cuh", line 44
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0040*/                   NOP ;
"""


@contextlib.contextmanager
def written(text, suffix):
    """A temporary file holding `text`, its path while the block runs."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)


def run(fn, text, *args):
    with written(text, ".csv") as path:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fn(path, *args)
        return out.getvalue()


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

    def test_listing_puts_source_lines_to_instructions(self):
        with written(LISTING, ".sass") as path:
            listings = nh.read_listings([path])
        self.assertEqual(listings["_Z2wyv"], [("LDG", "wy.cuh:40", "tile.cuh:7"), ("LDG", "wy.cuh:41", "wy.cuh:41"),
                                              ("HMMA", "wy.cuh:41", "wy.cuh:41"), ("BAR", "wy.cuh:44", "wy.cuh:44"),
                                              ("NOP", "wy.cuh:44", "wy.cuh:44")])
        out = run(nh.sass_hotspots, SASS, 3, listings)
        wy, sp = out.split("== state_pass")
        self.assertIn("00007f00  LDG.E R2, desc[UR4][R4.64]  [wy.cuh:40 < tile.cuh:7]", wy)
        self.assertIn("00007f20  HMMA.16816.F32.BF16 R10, R12, R14, R10  [wy.cuh:41]", wy)
        # per source line: 600 at line 40, 200 + 150 at 41, 50 at 44
        by_line = wy.split("source lines")[1]
        self.assertLess(by_line.index(" 60.0%  wy.cuh:40"), by_line.index(" 35.0%  wy.cuh:41"))
        self.assertIn("  5.0%  wy.cuh:44", by_line)
        # state_pass's opcodes are no function's of the listing: said, no lines
        self.assertIn("no function of the listings has these instructions", sp)
        rows = [l for l in sp.splitlines() if "%  0000" in l]
        self.assertEqual(len(rows), 2)
        self.assertFalse(any(l.endswith("]") and "  [" in l for l in rows), rows)
        self.assertNotIn("source lines (", sp)

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
