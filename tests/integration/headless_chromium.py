"""Opens a local HTML file in headless Chromium (Debian's `chromium`), takes a
screenshot and collects the page's console messages, kept off the network.

    shot = render(page, png)   # -> Render(returncode, png, console, stderr)
    colored_pixels(png)        # how much of the screenshot is in colour (charts)
"""

import collections
import os
import re
import shutil
import subprocess

Render = collections.namedtuple("Render", "returncode png console stderr")

# Chromium's log line for a page console message (any level: console.log, .error,
# an uncaught exception, a resource that failed to load).
CONSOLE = re.compile(r":CONSOLE[:(]")


def chromium():
    """Path of the chromium program, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(page, png, width=1400, height=3000, timeout=180):
    """Screenshots file `page` into `png` (width x height CSS pixels) in headless Chromium.

    Every network request but loopback fails (no proxy, DNS answers nothing), and the
    background services that phone home are off. Returns a Render whose `console`
    lists the console messages the page produced."""
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-default-apps", "--disable-extensions",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
            "--enable-logging=stderr", "--v=0", f"--window-size={width},{height}",
            f"--screenshot={png}", f"--user-data-dir={os.path.dirname(os.path.abspath(png))}/chromium-profile",
            f"file://{os.path.abspath(page)}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    console = [l for l in p.stderr.splitlines() if CONSOLE.search(l)]
    return Render(p.returncode, png, console, p.stderr)


def colored_pixels(png, min_saturation=0.25):
    """Pixels of `png` whose colour is far from grey (max - min channel > min_saturation):
    chart lines and bars, not black text on white. Also returns the image's size."""
    import matplotlib.image as mpimg
    a = mpimg.imread(png)[..., :3]
    sat = a.max(axis=-1) - a.min(axis=-1)
    return int((sat > min_saturation).sum()), a.shape[0] * a.shape[1]
