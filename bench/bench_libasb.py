"""Shared by the benchmarks: percentiles, and building a bench client against the libasb of this
tree (pkg-config from build/lib, rpath to it)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def build_libasb_client(source, out, extra_libs=()):
    """Compiles bench/<source> into out, linked against build/lib's libasb."""
    os.makedirs(os.path.dirname(out), exist_ok=True)
    lib = os.path.join(BUILD, "lib")
    env = {**os.environ, "PKG_CONFIG_PATH": os.path.join(lib, "pkgconfig")}
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libasb"], capture_output=True,
                           text=True, env=env, check=True).stdout.split()
    subprocess.run(["cc", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                    os.path.join(ROOT, "bench", source), *flags, *extra_libs,
                    f"-Wl,-rpath,{lib}", "-o", out], check=True)
