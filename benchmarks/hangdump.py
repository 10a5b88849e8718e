"""Run ddp_train with a stack dump of every thread after HANG_S seconds (finding where a run hangs)."""
import faulthandler
import os
import runpy
import sys

faulthandler.dump_traceback_later(float(os.environ.get("HANG_S", "30")), exit=True)
sys.argv[0] = "ddp_train"
runpy.run_module("ddp_train", run_name="__main__", alter_sys=True)
