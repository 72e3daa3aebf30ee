import cProfile, time, os
_pr = cProfile.Profile()
_t0 = time.perf_counter()
_pr.enable()
try:
    _f = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")
    exec(compile(open(_f).read(), _f, "exec"), {"__name__": "__main__", "__file__": _f})
finally:
    _dt = time.perf_counter() - _t0
    n = len(os.listdir("/tmp/prof"))
    _pr.disable()
    _pr.dump_stats(f"/tmp/prof/{n:03d}-{_dt*1000:.0f}ms.prof")
