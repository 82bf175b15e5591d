#!/usr/bin/python3
"""Opens the ShardLab web dashboard in headless Chromium and checks what a person would see.

    browser_check.py URL --ranks 8 [--replay] [--screenshot OUT.png] [--timeout 60]
    browser_check.py URL --frame-times N     (prints frame-time figures as JSON, checks nothing)
    browser_check.py URL --plan [--screenshot OUT.png]   (the planner's page, URL/plan)
    browser_check.py URL --holdings zero2|fsdp --ranks 4 --colour memory.params=#... [--screenshot P]
                     [--step [--step-screenshot P]]
    browser_check.py URL --step-dims --ranks 4 --colour memory.params=#...
    browser_check.py URL --holdings-unknown [--screenshot P]   (the "Who holds what" panel)

Live (default): the page connects ("live"), draws one rank cell per rank, the loss chart's points
grow while the run goes, memory bars for every rank, one heat-map row per rank, a communication
table with rows, timeline lanes; the memory legend names optimizer_state in full (not clipped),
the "model states only" switch (#mem-states) exists and toggling it changes the memory chart's
scale (window.shardlab.memory.top; left as it was after), and every grid cell shows a step number
(window.shardlab.gridText).
--straggler N: rank N marked as the straggler in the grid and named in the diagnosis box.
--replay: the same, plus the replay bar: pausing stops the position, the slider seeks.
--token-file F: a dashboard off loopback; first the sign-in page (refused without a token), then
the token from F entered there, then the checks above.
--plan: the planner's page instead (URL/plan): gpt3-175b on 1024 A100 80GB with a global batch of
1536 chosen in the form and planned; the table has rows, its first row's TFLOP/s is /api/plan's
first plan's as shown (one decimal), the memory chart has a bar per pipeline stage, the reason is
the API's; then tp 3 is answered with the planner's message on the page's error line.
--holdings STRATEGY: the "Who holds what" panel of a live run of that strategy (zero2 or fsdp) on
--ranks ranks, against /api/run's layout read here: first the strategy's definition holds there
(zero2: every rank's parameters are [0, total), the gradients and the optimizer state of the ranks
are disjoint and together [0, total); fsdp: all three so); then window.shardlab.holdings has a lane
per category and state array for every rank, holding /api/run's ranges, each drawn at
x0 + b/total*(x1-x0) .. x0 + e/total*(x1-x0) within 1.5 px; the canvas's pixels in the middle of
each drawn range are the lane's category colour (--colour memory.*), and in the middle of each gap
of 4 px or more they are not. --screenshot then shoots the panel alone.
--step (with --holdings): the step scrubber over the strips (step_replay.js): it follows the run
("step N (live)", frame 0); ▶ clicked until window.shardlab.step.title starts with "reduce_scatter"
(each click moves the index by exactly one and leaves live), which must move the gradients; for
each rank its receive highlight on the grads lane is its own chunk of the frame's unit (the layout's
units: [b, e) padded to a multiple of --ranks, cut in --ranks chunks, chunk r clipped to e) at the
axis's x within 1.5 px, the canvas's pixels in the receive colour (the legend's --hl) in it, not
just outside it nor in the others' chunks; the send highlight spans the whole unit. Then on to
"update": each state-array lane's write highlight is the rank's held optimizer state. ◀ goes back
one; Right then Left pressed on ◀ (the bar takes them, as the app's does) go one on and one back;
live follows a newer step; a step-0 section shows its note, disabled, nothing lit; the axis
stays at the top of the box while the strips scroll. --step-screenshot P: the panel on the
reduce_scatter frame.
--step-dims: a run whose first frame has some of the --ranks ranks only (the toy job as pp 2 x dp 2:
a stage's forward): the scrubber held on it (▶ then ◀; /api/run's first frame has the same title)
dims the strips of the ranks that frame leaves out: the middle of a params range is the params
colour blended 30% over white (within 3 per channel) for them, exactly the params colour for the
frame's ranks.
--holdings-unknown: a page whose run sent no LAYOUT (/api/run's layout is null): the panel says
"Layout unknown: ..." and draws no strips (--screenshot: the panel alone).
--colour MEANING=#rrggbb (repeated; MEANING as in /palette.js, e.g. span.backward, memory.params):
the colour the desktop app draws that meaning with. The page must show the same: the legend's
swatch (its computed style) and, where the meaning fills areas on a canvas (a backward span, a
params bar, the straggler's ring), pixels of exactly that colour on the canvas.
Exit status 0 when every check holds; 1 with one line per failed check; 2 when the browser could
not start (the caller skips). Uses Debian's chromium, chromium-driver and python3-selenium; as
root Chromium needs --no-sandbox.
"""
import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
except ImportError as e:  # the caller checks first; this is the fallback
    print(f"browser_check: python3-selenium is missing: {e}", file=sys.stderr)
    sys.exit(2)


def start_browser():
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100",
              "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    try:
        return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    except Exception as e:  # noqa: BLE001 - any start failure means "cannot run here"
        print(f"browser_check: Chromium did not start: {e}", file=sys.stderr)
        sys.exit(2)


class Checks:
    def __init__(self, driver, timeout):
        self.d = driver
        self.timeout = timeout
        self.failed = []

    def attr(self, css, name):
        els = self.d.find_elements(By.CSS_SELECTOR, css)
        return els[0].get_attribute(name) if els else None

    def text(self, css):
        els = self.d.find_elements(By.CSS_SELECTOR, css)
        return els[0].text if els else None

    def wait_for(self, what, predicate, timeout=None):
        """Polls predicate() until it returns a true value or the timeout; records a failure."""
        deadline = time.time() + (timeout or self.timeout)
        last = None
        while time.time() < deadline:
            try:
                last = predicate()
                if last:
                    return last
            except Exception as e:  # noqa: BLE001 - element not there yet
                last = e
            time.sleep(0.2)
        self.failed.append(f"{what} (last seen: {last!r})")
        return None

    def int_attr(self, css, name):
        v = self.attr(css, name)
        return int(v) if v not in (None, "") else None


def check_page(c, ranks, replay, straggler=None):
    c.wait_for("the page says it is connected (#conn-status 'live')",
               lambda: c.text("#conn-status") == "live")
    c.wait_for(f"{ranks} rank cells in the grid (#rank-grid data-cells)",
               lambda: c.int_attr("#rank-grid", "data-cells") == ranks)
    c.wait_for(f"memory bars for {ranks} ranks (#memory-chart data-ranks)",
               lambda: c.int_attr("#memory-chart", "data-ranks") == ranks)
    c.wait_for(f"{ranks} heat-map rows (#heat-map data-rows)",
               lambda: c.int_attr("#heat-map", "data-rows") == ranks)
    c.wait_for("heat-map columns (#heat-map data-cols > 0)",
               lambda: (c.int_attr("#heat-map", "data-cols") or 0) > 0)
    c.wait_for("rows in the communication table (#comm-table tbody tr)",
               lambda: len(c.d.find_elements(By.CSS_SELECTOR, "#comm-table tbody tr")) > 0)
    c.wait_for("timeline lanes (#timeline data-lanes > 0)",
               lambda: (c.int_attr("#timeline", "data-lanes") or 0) > 0)
    c.wait_for("the job's name in the header (#job-name)",
               lambda: (c.text("#job-name") or "").strip() != "")
    # Loss points grow while the run (or the replay) goes.
    first = c.wait_for("loss points on the chart (#loss-chart data-points > 0)",
                       lambda: c.int_attr("#loss-chart", "data-points"))
    if first:
        c.wait_for(f"the loss chart growing past {first} points",
                   lambda: (c.int_attr("#loss-chart", "data-points") or 0) > first)
    check_memory_and_grid(c, ranks)
    if straggler is not None:
        c.wait_for(f"rank {straggler} marked as the straggler (#rank-grid data-straggler)",
                   lambda: c.int_attr("#rank-grid", "data-straggler") == straggler)
        c.wait_for(f"the diagnosis names rank {straggler} (#diagnosis)",
                   lambda: f"rank {straggler} (" in (c.text("#diagnosis") or ""))
    if replay:
        check_replay(c)


def memory_drawn(c):
    return c.d.execute_script("return window.shardlab && window.shardlab.memory;")


def check_memory_and_grid(c, ranks):
    """The memory legend in full, the model-states switch and its scale, a step in every cell."""
    legend = c.wait_for(
        "the memory legend names optimizer_state in full, not clipped (#mem-legend span)",
        lambda: c.d.execute_script(
            "for (const s of document.querySelectorAll('#mem-legend span'))"
            "  if (s.textContent.startsWith('optimizer_state') && s.scrollWidth <= s.clientWidth + 1"
            "      && s.getBoundingClientRect().width > 0) return s.textContent;"
            "return null;"))
    if legend and ("…" in legend or "..." in legend):
        c.failed.append(f"the memory legend's entry is not elided (got {legend!r})")
    if not c.d.find_elements(By.CSS_SELECTOR, "#mem-states"):
        c.failed.append("the memory panel has a 'model states only' switch (#mem-states)")
        return
    first = c.wait_for("the memory chart reports its scale (window.shardlab.memory.top > 0)",
                       lambda: (lambda m: m if m and m.get("top", 0) > 0 else None)(memory_drawn(c)))
    if first:
        tops = {first["modelStatesOnly"]: first["top"]}
        box_checked = c.d.execute_script("return document.getElementById('mem-states').checked;")
        if box_checked != first["modelStatesOnly"]:
            c.failed.append(f"#mem-states shows the chart's mode ({box_checked} against "
                            f"{first['modelStatesOnly']})")
        c.d.execute_script("document.getElementById('mem-states').click();")
        flipped = c.wait_for(
            "toggling 'model states only' redraws the chart in the other mode",
            lambda: (lambda m: m if m and m.get("modelStatesOnly") != first["modelStatesOnly"]
                     and m.get("chosen") and m.get("top", 0) > 0 else None)(memory_drawn(c)),
            timeout=15)
        if flipped:
            tops[flipped["modelStatesOnly"]] = flipped["top"]
            whole = first if not first["modelStatesOnly"] else flipped
            # Lower where the whole bars reach above the model states' axis (the activations of a
            # GPT); a job whose activations are small may round to the same axis, never higher.
            must_drop = whole.get("tallest", 0) > tops[True]
            if tops[True] > tops[False] or (must_drop and not tops[True] < tops[False]):
                c.failed.append("with 'model states only' the memory axis tops out lower than with "
                                f"the activations (model states {tops[True]} B, all {tops[False]} B, "
                                f"tallest whole bar {whole.get('tallest')} B)")
            print(f"browser_check: memory axis top {tops[False]:.0f} B, model states only "
                  f"{tops[True]:.0f} B (on by itself: {first['modelStatesOnly']})")
        c.d.execute_script("document.getElementById('mem-states').click();")  # back as it was
        c.wait_for("toggling it again goes back",
                   lambda: (memory_drawn(c) or {}).get("modelStatesOnly") == first["modelStatesOnly"],
                   timeout=15)
    c.wait_for(f"each of the {ranks} grid cells shows a step number (window.shardlab.gridText)",
               lambda: c.d.execute_script(
                   "const t = window.shardlab.gridText || [];"
                   "return t.length === arguments[0] && t.every((lines) => Array.isArray(lines)"
                   "  && lines.some((l) => /^step \\d+$/.test(l)));", ranks))


# Where each page shows a meaning whose colour it shares with the desktop app: its legend swatch
# (CSS selector, computed-style property) and the canvas that paints it in areas wide enough to
# hold pixels of exactly that colour (None: lines, or spans too short to count on).
DASHBOARD_SHOWN = {
    "span.forward": (".legend .sp-forward", "background-color", "timeline"),
    "span.backward": (".legend .sp-backward", "background-color", "timeline"),
    "span.optimizer": (".legend .sp-optimizer", "background-color", None),
    "span.collective": (".legend .sp-collective", "background-color", None),
    "span.idle": (".legend .sw.idle", "background-color", "timeline"),
    "memory.params": ("#mem-legend i[data-category='params']", "background-color", "memory-chart"),
    "memory.grads": ("#mem-legend i[data-category='grads']", "background-color", None),
    "memory.optimizer_state": ("#mem-legend i[data-category='optimizer_state']",
                               "background-color", None),
    "memory.activations": ("#mem-legend i[data-category='activations']", "background-color", None),
    "memory.comm": ("#mem-legend i[data-category='comm']", "background-color", None),
    "rank.straggler": ("#grid-legend .fl-straggler", "border-top-color", "rank-grid"),
    "rank.failed": ("#grid-legend .fl-failed", "border-top-color", None),
    "rank.silent": ("#grid-legend .fl-silent", "background-color", None),
    "group.tp": ("#grid-legend .gr-tp", "border-top-color", None),
    "group.dp": ("#grid-legend .gr-dp", "border-top-color", None),
    "group.pp": ("#grid-legend .gr-pp", "border-top-color", None),
}
PLAN_SHOWN = {
    "memory.params": ("#plan-mem-legend .mem-params", "background-color", "plan-memory"),
    "memory.grads": ("#plan-mem-legend .mem-grads", "background-color", "plan-memory"),
    "memory.optimizer_state": ("#plan-mem-legend .mem-optimizer_state", "background-color",
                               "plan-memory"),
    "memory.activations": ("#plan-mem-legend .mem-activations", "background-color", None),
    "memory.comm": ("#plan-mem-legend .mem-comm", "background-color", None),
    "span.forward": ("#plan-time-legend span:first-child i", "background-color", "plan-time"),
    "limit.usable": ("#plan-mem-legend .ln-usable", "border-top-color", None),
    "limit.hbm": ("#plan-mem-legend .ln-hbm", "background-color", None),
}


def parse_colour(text):
    """'span.backward=#f28e2b' -> ('span.backward', (242, 142, 43))."""
    meaning, _, hexa = text.partition("=")
    hexa = hexa.strip().lstrip("#")
    if len(hexa) != 6:
        raise argparse.ArgumentTypeError(f"--colour {text}: want MEANING=#rrggbb")
    return meaning.strip(), tuple(int(hexa[i:i + 2], 16) for i in (0, 2, 4))


def painted_pixels(c, canvas_id, rgb):
    """How many opaque pixels of the canvas are exactly `rgb`."""
    return c.d.execute_script(
        "const [id, r, g, b] = arguments; const cv = document.getElementById(id);"
        "if (!cv || !cv.width || !cv.height) return 0;"
        "const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;"
        "let n = 0;"
        "for (let i = 0; i < d.length; i += 4)"
        "  if (d[i] === r && d[i + 1] === g && d[i + 2] === b && d[i + 3] === 255) n++;"
        "return n;", canvas_id, *rgb)


def swatch_rgb(c, css, prop):
    """The computed colour `prop` of the element at `css` as (r, g, b); None when there is no such
    element, the computed text when it is not an opaque colour."""
    value = c.d.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "return e ? getComputedStyle(e).getPropertyValue(arguments[1]) : null;", css, prop)
    if value is None:
        return None
    nums = re.findall(r"[0-9.]+", value)
    if len(nums) in (3, 4) and (len(nums) == 3 or float(nums[3]) == 1.0):
        return tuple(int(float(x)) for x in nums[:3])
    return value


def check_colours(c, colours, shown, straggler=None):
    """The page shows each meaning in the app's colour: its legend swatch, and its canvas."""
    for meaning, rgb in colours:
        if meaning not in shown:
            c.failed.append(f"--colour {meaning}: this page has no place known to show it")
            continue
        css, prop, canvas = shown[meaning]
        hexa = "#{:02x}{:02x}{:02x}".format(*rgb)
        if not c.wait_for(f"the legend's {meaning} swatch ({css}) in the app's {hexa}",
                          lambda css=css, prop=prop, rgb=rgb: swatch_rgb(c, css, prop) == rgb,
                          timeout=15):
            c.failed[-1] += f"; its {prop} is {swatch_rgb(c, css, prop)!r}"
        if canvas is None or (meaning == "rank.straggler" and straggler is None):
            continue
        if not c.wait_for(f"#{canvas} paints {meaning} in the app's {hexa}",
                          lambda canvas=canvas, rgb=rgb: painted_pixels(c, canvas, rgb) >= 10,
                          timeout=20):
            c.failed[-1] += f"; {painted_pixels(c, canvas, rgb)} pixels of it"


def replay_position(c):
    state = c.d.execute_script("return window.shardlab && window.shardlab.state;")
    return (state or {}).get("replay", {}).get("position")


def check_replay(c):
    c.wait_for("the replay bar is shown (#replay-bar)",
               lambda: c.d.find_element(By.CSS_SELECTOR, "#replay-bar").is_displayed())
    # Pause: the position stops moving.
    c.d.execute_script(
        "var b=document.querySelector('#replay-play'); if (b) b.click();")
    time.sleep(1.0)
    p1 = replay_position(c)
    time.sleep(1.5)
    p2 = replay_position(c)
    if p1 is None or p2 is None or abs(p2 - p1) > 1e-6:
        # Maybe the click started it instead (it had already finished): not a pause.
        c.failed.append(f"pausing the replay stops its position (went {p1} -> {p2})")
    # Seek to the start: the loss chart then holds fewer points than before.
    before = c.int_attr("#loss-chart", "data-points") or 0
    c.d.execute_script(
        "var s=document.querySelector('#replay-slider'); s.value=s.min;"
        "s.dispatchEvent(new Event('input',{bubbles:true}));"
        "s.dispatchEvent(new Event('change',{bubbles:true}));")
    c.wait_for(f"seeking to the start shows fewer loss points than {before}",
               lambda: (c.int_attr("#loss-chart", "data-points") or 0) < before or before == 0,
               timeout=10)


# ---- Who holds what -------------------------------------------------------------------------
HOLDINGS_CATS = ("params", "grads", "optimizer_state")
UNKNOWN_TEXT = ("Layout unknown: this run's ranks sent no LAYOUT event (recorded before protocol "
                "version 4)")


def api_run(url):
    with urllib.request.urlopen(url.rstrip("/") + "/api/run", timeout=30) as r:
        return json.load(r)


def merged(ranges):
    """[[b, e], ...] sorted and joined where they touch or overlap."""
    out = []
    for b, e in sorted((b, e) for b, e in ranges if e > b):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def check_definition(c, layout, strategy, ranks):
    """The strategy's definition on /api/run's layout, independent of the page."""
    tensors = layout["tensors"]
    total = max(t["offset"] + t["size"] for t in tensors)
    entries = sorted(layout["ranks"], key=lambda e: e["rank"])
    if [e["rank"] for e in entries] != list(range(ranks)):
        c.failed.append(f"/api/run's layout has ranks 0..{ranks - 1} (got {[e['rank'] for e in entries]})")
        return total
    whole = [[0, total]]
    sharded = ("params", "grads", "optimizer_state") if strategy == "fsdp" else ("grads", "optimizer_state")
    for cat in HOLDINGS_CATS:
        lists = [e["held"][cat] for e in entries]
        if cat not in sharded:
            for e, held in zip(entries, lists):
                if merged(held) != whole:
                    c.failed.append(f"{strategy}: rank {e['rank']} holds all {cat} [0, {total}) "
                                    f"(/api/run: {held})")
            continue
        every = [r for held in lists for r in held]
        if sum(e - b for b, e in every) != total or merged(every) != whole:
            c.failed.append(f"{strategy}: the ranks' {cat} are disjoint and together [0, {total}) "
                            f"(/api/run: {lists})")
    return total


def canvas_pixels(c, points):
    """The canvas's RGBA at each (x, y) in CSS pixels."""
    return c.d.execute_script(
        "const cv = document.getElementById('holdings'); const ctx = cv.getContext('2d');"
        "const k = cv.width / cv.getBoundingClientRect().width;"
        "return arguments[0].map(([x, y]) => Array.from("
        "  ctx.getImageData(Math.floor(x * k), Math.floor(y * k), 1, 1).data));", points)


def sample_x(xa, xb, avoid, margin=2.0):
    """A point of [xa, xb] at least `margin` from both ends and from every x in `avoid` (the
    tensor boundaries, drawn as lines over the lanes), nearest the middle; None when none is."""
    mid = (xa + xb) / 2
    for i in range(0, 2 * int(xb - xa) + 1):
        x = mid + ((i + 1) // 2) * 0.5 * (1 if i % 2 else -1)
        if xa + margin <= x <= xb - margin and all(abs(x - a) >= margin for a in avoid):
            return x
    return None


def spots(xa, xb, avoid):
    """Where to read the canvas in [xa, xb]: its middle (or the point nearest it clear of the
    lines in `avoid`), and 2.5 px inside either end when it is 6 px wide or more and they are
    clear of those lines (a range drawn 2.5 px or more off its place fails there)."""
    out = []
    x = sample_x(xa, xb, avoid)
    if x is not None:
        out.append(x)
    if xb - xa >= 6:
        out += [x for x in (xa + 2.5, xb - 2.5) if all(abs(x - a) >= 1.5 for a in avoid)]
    return out


def check_holdings(c, url, strategy, ranks, colours, screenshot, step_screenshot=None):
    def drawn():
        h = c.d.execute_script("return window.shardlab && window.shardlab.holdings;")
        return h if h and len(h.get("ranks") or []) == ranks else None
    page = c.wait_for(f"window.shardlab.holdings has {ranks} ranks", drawn)
    if not page:
        return
    layout = api_run(url)["layout"]
    if not layout:
        c.failed.append("/api/run has a layout")
        return
    total = check_definition(c, layout, strategy, ranks)
    axis = page["axis"]
    x0, x1 = axis["x0"], axis["x1"]
    width = c.d.execute_script("return document.getElementById('holdings').getBoundingClientRect().width;")
    if axis["total"] != total or not (0 <= x0 < x1 <= width) or x1 - x0 < 200:
        c.failed.append(f"the axis spans [0, {total}) over 200 px or more of the canvas's {width} "
                        f"(page: {axis})")
        return
    X = lambda i: x0 + i / total * (x1 - x0)  # noqa: E731
    colour = {cat: rgb for cat in HOLDINGS_CATS for m, rgb in colours if m == f"memory.{cat}"}
    if set(colour) != set(HOLDINGS_CATS):
        c.failed.append("--colour memory.params, memory.grads and memory.optimizer_state are given")
        return
    bounds = [X(t["offset"]) for t in layout["tensors"] if 0 < t["offset"] < total]
    api = {e["rank"]: e for e in layout["ranks"]}
    inside, outside = [], []  # (what, x, y, rgb)
    for pr in page["ranks"]:
        e = api.get(pr["rank"])
        if e is None:
            c.failed.append(f"rank {pr['rank']} drawn, not in /api/run's layout")
            continue
        want = [("params", "params"), ("grads", "grads")] + [
            (a, "optimizer_state") for a in e["state_arrays"]]
        got = [ln["lane"] for ln in pr["lanes"]]
        if got != [w for w, _ in want]:
            c.failed.append(f"rank {pr['rank']}'s lanes are {[w for w, _ in want]} (page: {got})")
            continue
        for ln, (name, cat) in zip(pr["lanes"], want):
            held = e["held"][cat]
            what = f"rank {pr['rank']} {name}"
            if ln["index_ranges"] != held or len(ln["ranges"]) != len(held):
                c.failed.append(f"{what}: the page's ranges are /api/run's {held} "
                                f"(page: {ln['index_ranges']})")
                continue
            y = (ln["y0"] + ln["y1"]) / 2
            for (b, en), (xa, xb) in zip(held, ln["ranges"]):
                if abs(xa - X(b)) > 1.5 or abs(xb - X(en)) > 1.5:
                    c.failed.append(f"{what}: [{b}, {en}) drawn at {X(b):.1f}..{X(en):.1f} px "
                                    f"(page: {xa:.1f}..{xb:.1f})")
                for x in spots(X(b), X(en), bounds):
                    inside.append((f"{what} [{b}, {en}) at x {x:.1f}", x, y, colour[cat]))
            # The gaps: [0, total) less the held ranges, 4 px wide or more.
            edge = 0
            for b, en in merged(held) + [[total, total]]:
                if X(b) - X(edge) >= 4:
                    for x in spots(X(edge), X(b), []):
                        outside.append((f"{what} gap [{edge}, {b}) at x {x:.1f}", x, y, colour[cat]))
                edge = max(edge, en)
    if not inside or not outside:
        c.failed.append(f"points to check in held ranges ({len(inside)}) and in gaps ({len(outside)})")
    for group, painted in ((inside, True), (outside, False)):
        px = canvas_pixels(c, [[x, y] for _, x, y, _ in group]) if group else []
        for (what, _, _, rgb), p in zip(group, px):
            if (tuple(p[:3]) == rgb and p[3] == 255) != painted:
                hexa = "#{:02x}{:02x}{:02x}".format(*rgb)
                c.failed.append(f"{what}: {'painted' if painted else 'not painted'} {hexa} (pixel {p})")
    formula = next((e["formula"] for e in layout["ranks"] if e["rank"] == 0), "")
    c.wait_for("rank 0's formula above the strips (#holdings-formula)",
               lambda: formula and formula in (c.text("#holdings-formula") or ""), timeout=5)
    print(f"browser_check: {strategy}: {len(page['ranks'])} ranks; {len(inside)} pixels in held "
          f"ranges and {len(outside)} in gaps checked against /api/run")
    if screenshot:
        panel_screenshot(c, screenshot)
    if step_screenshot is not None:
        check_step(c, url, ranks, step_screenshot)


# ---- One step, phase by phase (step_replay.js) -------------------------------------------------
def page_step(c):
    return c.d.execute_script("return window.shardlab && window.shardlab.step;") or {}


def page_highlights(c):
    return (c.d.execute_script("return window.shardlab && window.shardlab.holdings;") or {}).get(
        "highlights") or []


def click_next(c, what):
    """Clicks ▶ once: the frame's index goes up by exactly one (and the scrubber leaves 'live')."""
    before = page_step(c).get("index", -1)
    c.d.find_element(By.ID, "step-next").click()
    after = c.wait_for(f"{what}: one click on ▶ moves the scrubber on from frame {before}",
                       lambda: (lambda s: s if s.get("index", -1) != before else None)(page_step(c)),
                       timeout=10)
    if not after:
        return None
    if after["index"] != before + 1 or after.get("live"):
        c.failed.append(f"{what}: one click on ▶ moves from frame {before} to {before + 1}, not live "
                        f"(page: {after})")
        return None
    return after


def click_until(c, what, predicate):
    """Clicks ▶ until predicate(window.shardlab.step.title) holds; the step then, or None."""
    st = page_step(c)
    for _ in range(st.get("frames", 0) + 1):
        if predicate(st.get("title", "")):
            return st
        st = click_next(c, what)
        if st is None:
            return None
    c.failed.append(f"{what}: no frame found by clicking ▶ (last: {st})")
    return None


def hl_of(hls, rank, lane, role):
    return [h for h in hls if h["rank"] == rank and h["lane"] == lane and h["role"] == role]


def role_rgb(c, role):
    """The legend swatch's colour of a role (its --hl), as (r, g, b)."""
    v = c.d.execute_script(
        "const e = document.querySelector('#step-legend .hl-' + arguments[0]);"
        "return e ? getComputedStyle(e).getPropertyValue('--hl').trim() : null;", role) or ""
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", v)
    return tuple(int(m.group(1)[i:i + 2], 16) for i in (0, 2, 4)) if m else None


def check_step(c, url, ranks, screenshot):
    """The scrubber over the strips: the first reduce_scatter of the gradients, picked with ▶,
    lights up each rank's own chunk of the unit as received and the whole unit as sent, where the
    layout's units put them (computed here); the update writes each rank's optimizer state."""
    st = c.wait_for("the scrubber follows a step (window.shardlab.step: live, frames > 0)",
                    lambda: (lambda s: s if s.get("live") and s.get("frames", 0) > 0
                             and s.get("index", -1) >= 0 else None)(page_step(c)))
    if not st:
        return
    label = c.text("#step-label") or ""
    if not re.match(rf"step {st['step']:,} \(live\)", label):
        c.failed.append(f"the scrubber says 'step {st['step']:,} (live)' (#step-label: {label!r})")
    if st["index"] != 0:
        c.failed.append(f"the scrubber starts at the step's first frame (index {st['index']})")
    rs = click_until(c, "the first reduce_scatter", lambda t: t.startswith("reduce_scatter"))
    if not rs:
        return
    if not re.fullmatch(r"reduce_scatter of grads.*", rs["title"]):
        c.failed.append(f"the first reduce_scatter moves the gradients (title {rs['title']!r})")
        return
    doc = api_run(url)
    layout, api_step = doc["layout"], doc["step"] or {}
    frames = api_step.get("frames") or []
    f = frames[rs["index"]] if rs["index"] < len(frames) else {}
    # The page holds the step it showed when ▶ was first clicked; the run has gone on since, with
    # the same frames in every step.
    if f.get("title") != rs["title"]:
        c.failed.append(f"/api/run's step has frame {rs['index']} titled {rs['title']!r} (got {f.get('title')!r})")
        return
    total = max(t["offset"] + t["size"] for t in layout["tensors"])
    page = c.d.execute_script("return window.shardlab.holdings;")
    x0, x1 = page["axis"]["x0"], page["axis"]["x1"]
    X = lambda i: x0 + i / total * (x1 - x0)  # noqa: E731
    bounds = [X(t["offset"]) for t in layout["tensors"] if 0 < t["offset"] < total]
    hls = page["highlights"]
    receive = role_rgb(c, "receive")
    if receive is None:
        c.failed.append("the legend has a 'receives' swatch (#step-legend .hl-receive, its --hl)")
        return
    u = f["unit"]
    checked = 0
    for e in sorted(layout["ranks"], key=lambda e: e["rank"]):
        r = e["rank"]
        unit = e["units"][u] if 0 <= u < len(e["units"]) else None
        if not unit or len(unit) != 1:
            c.failed.append(f"rank {r}: /api/run's layout has unit {u} as one range (got {unit})")
            continue
        b, en = unit[0]
        chunk = -(-(en - b) // ranks)  # the unit padded to a multiple of `ranks`, cut in `ranks`
        cuts = [(min(b + q * chunk, en), min(b + (q + 1) * chunk, en)) for q in range(ranks)]
        what = f"{rs['title']}: rank {r}"
        got = hl_of(hls, r, "grads", "receive")
        cb, ce = cuts[r]
        if len(got) != 1 or got[0]["ranges"] != [[cb, ce]] or len(got[0]["x"]) != 1 or \
                abs(got[0]["x"][0][0] - X(cb)) > 1.5 or abs(got[0]["x"][0][1] - X(ce)) > 1.5:
            c.failed.append(f"{what} receives its chunk [{cb}, {ce}) of unit {u} [{b}, {en}) on its grads "
                            f"lane at {X(cb):.1f}..{X(ce):.1f} px (page: {got})")
            continue
        sent = hl_of(hls, r, "grads", "send")
        if len(sent) != 1 or merged(sent[0]["ranges"]) != [[b, en]] or \
                abs(min(x for x, _ in sent[0]["x"]) - X(b)) > 1.5 or abs(max(x for _, x in sent[0]["x"]) - X(en)) > 1.5:
            c.failed.append(f"{what} sends the whole unit [{b}, {en}) at {X(b):.1f}..{X(en):.1f} px (page: {sent})")
        y = (got[0]["y0"] + got[0]["y1"]) / 2
        pts = []
        for x in spots(X(cb), X(ce), bounds):  # its middle, and 2.5 px inside either end
            pts.append((f"{what}: inside its chunk at x {x:.1f}", x, True))
        for x in (X(cb) - 2.5, X(ce) + 2.5):  # just outside either end (within the axis)
            if x0 < x < x1 and all(abs(x - a) >= 1.5 for a in bounds):
                pts.append((f"{what}: just outside its chunk at x {x:.1f}", x, False))
        for q, (qb, qe) in enumerate(cuts):
            if q != r and X(qe) - X(qb) >= 4:
                x = sample_x(X(qb), X(qe), bounds)
                if x is not None:
                    pts.append((f"{what}: in rank {q}'s chunk at x {x:.1f}", x, False))
        px = canvas_pixels(c, [[x, y] for _, x, _ in pts])
        for (w, _, inside), p in zip(pts, px):
            checked += 1
            if (tuple(p[:3]) == receive and p[3] == 255) != inside:
                c.failed.append(f"{w}: {'painted' if inside else 'not painted'} in the receive colour "
                                f"{receive} (pixel {p})")
    if not checked:
        c.failed.append("pixels of the receive highlights were checked")
    if screenshot:
        panel_screenshot(c, screenshot)
    up = click_until(c, "the update", lambda t: t == "update")
    if up:
        hls = page_highlights(c)
        for e in layout["ranks"]:
            held = e["held"]["optimizer_state"]
            for a in e["state_arrays"]:
                got = hl_of(hls, e["rank"], a, "write")
                xs = [[X(b), X(en)] for b, en in held]
                if len(got) != 1 or got[0]["ranges"] != held or len(got[0]["x"]) != len(xs) or any(
                        abs(p - q) > 1.5 for gx, wx in zip(got[0]["x"], xs) for p, q in zip(gx, wx)):
                    c.failed.append(f"update: rank {e['rank']} writes its optimizer state {held} on lane {a} "
                                    f"(page: {got})")
    # ◀ goes back by one; "live" follows the run again.
    before = page_step(c).get("index", -1)
    c.d.find_element(By.ID, "step-prev").click()
    c.wait_for(f"◀ goes back from frame {before} to {before - 1}",
               lambda: page_step(c).get("index") == before - 1, timeout=10)
    # Right and Left on the bar, as in the app: from ◀ (focused), one frame on, then one back.
    for key, name, to in ((Keys.ARROW_RIGHT, "Right", before), (Keys.ARROW_LEFT, "Left", before - 1)):
        c.d.find_element(By.ID, "step-prev").send_keys(key)
        c.wait_for(f"{name} on the scrubber's bar moves to frame {to}",
                   lambda: page_step(c).get("index") == to and not page_step(c).get("live"), timeout=10)
    c.d.find_element(By.ID, "step-live").click()
    c.wait_for("'live' follows the run again (window.shardlab.step.live, a newer step)",
               lambda: (lambda s: s.get("live") and s.get("step", 0) > st["step"])(page_step(c)), timeout=20)
    # A step section with nothing to replay (step 0, as before every rank completed one): the
    # scrubber shows its note, disabled. Applied as the server's delta frame would be, and read in
    # the same script (a real frame cannot come in between); the next real one puts it back.
    note = "no step completed by every rank yet (injected by browser_check)"
    got = c.d.execute_script(
        "const S = window.shardlab; const before = S.state.step;"
        "S.apply({step: {step: 0, first: 0, last: 0, strategy: '', note: arguments[0], frames: [],"
        "  truncated: false}}); S.renderNow();"
        "const out = {title: document.getElementById('step-title').textContent,"
        "  slider: document.getElementById('step-slider').disabled,"
        "  next: document.getElementById('step-next').disabled,"
        "  prev: document.getElementById('step-prev').disabled,"
        "  highlights: S.holdings.highlights.length, index: S.step.index};"
        "S.apply({step: before}); S.renderNow(); return out;", note)
    if got != {"title": note, "slider": True, "next": True, "prev": True, "highlights": 0, "index": -1}:
        c.failed.append(f"with step 0 the scrubber shows the note, disabled, and nothing lit (page: {got})")
    # The axis stays at the top of the box while the strips scroll under it (the box made short
    # here so that 4 ranks scroll in it, as 64 do at its usual height).
    stuck = c.d.execute_script(
        "const b = document.getElementById('holdings-box'), a = document.getElementById('holdings-axis');"
        "const was = b.style.maxHeight; b.style.maxHeight = '160px'; b.scrollTop = 120;"
        "const out = {scrolled: b.scrollTop, gap: a.getBoundingClientRect().top - b.getBoundingClientRect().top,"
        "  canvas: document.getElementById('holdings').getBoundingClientRect().top - b.getBoundingClientRect().top};"
        "b.scrollTop = 0; b.style.maxHeight = was; return out;")
    if not (stuck["scrolled"] > 100 and abs(stuck["gap"]) <= 1.5 and stuck["canvas"] < 0):
        c.failed.append(f"the axis (#holdings-axis) stays at the top of #holdings-box while the strips scroll "
                        f"(page: {stuck})")
    print(f"browser_check: step scrubber: {rs['title']!r} at frame {rs['index']}, {checked} pixels of "
          f"the receive highlights checked")


def check_step_dims(c, url, ranks, colours):
    """A run whose first frame has only some ranks (pp 2 x dp 2: a stage's forward): the scrubber,
    held on that frame, dims the strips of the ranks /api/run's frame leaves out (their parameters
    drawn at 30% over white) and not those it has (the parameters' own colour), by pixels."""
    params = next((rgb for m, rgb in colours if m == "memory.params"), None)
    if params is None:
        c.failed.append("--colour memory.params is given")
        return
    page = c.wait_for(f"window.shardlab.holdings has {ranks} ranks",
                      lambda: (lambda h: h if h and len(h.get("ranks") or []) == ranks else None)(
                          c.d.execute_script("return window.shardlab && window.shardlab.holdings;")))
    st = c.wait_for("the scrubber follows a step (live, frames > 0)",
                    lambda: (lambda s: s if s.get("live") and s.get("frames", 0) > 0 else None)(page_step(c)))
    if not page or not st:
        return
    # Held on the first frame: ▶ then ◀ (the run's next steps have the same frames).
    if not click_next(c, "dims"):
        return
    c.d.find_element(By.ID, "step-prev").click()
    st = c.wait_for("◀ back to the first frame", lambda: (lambda s: s if s.get("index") == 0 else None)(
        page_step(c)), timeout=10)
    if not st:
        return
    doc = api_run(url)
    frames = (doc.get("step") or {}).get("frames") or []
    if not frames or frames[0].get("title") != st["title"]:
        c.failed.append(f"/api/run's first frame is the page's {st['title']!r} "
                        f"(got {frames[0].get('title') if frames else None!r})")
        return
    members = {r["rank"] for r in frames[0].get("ranks") or []}
    if not 0 < len(members) < ranks:
        c.failed.append(f"the first frame has some of the {ranks} ranks, not all (ranks {sorted(members)})")
        return
    dim = tuple(round(0.3 * v + 0.7 * 255) for v in params)
    page = c.d.execute_script("return window.shardlab.holdings;")
    tensors = (doc.get("layout") or {}).get("tensors") or []
    total = max((t["offset"] + t["size"] for t in tensors), default=0)
    x0, x1 = page["axis"]["x0"], page["axis"]["x1"]
    bounds = [x0 + t["offset"] / total * (x1 - x0) for t in tensors if 0 < t["offset"] < total]
    pts = []
    for pr in page["ranks"]:
        ln = next((ln for ln in pr["lanes"] if ln["lane"] == "params"), None)
        if not ln or not ln["ranges"]:
            c.failed.append(f"rank {pr['rank']} has a drawn params lane (page: {ln})")
            continue
        xa, xb = max(ln["ranges"], key=lambda r: r[1] - r[0])
        x = sample_x(xa, xb, bounds)  # clear of the tensor boundaries' lines
        if x is None:
            c.failed.append(f"rank {pr['rank']}'s params lane has a point clear of tensor boundaries")
            continue
        # The lane's middle third: clear of the bands over its top and bottom thirds.
        pts.append((pr["rank"], x, (ln["y0"] + ln["y1"]) / 2))
    px = canvas_pixels(c, [[x, y] for _, x, y in pts])
    for (r, x, y), p in zip(pts, px):
        got = tuple(p[:3])
        if r in members and got != params:
            c.failed.append(f"rank {r} (in the frame) is not dimmed: its params at x {x:.1f} are {params} "
                            f"(pixel {p})")
        if r not in members and (got == params or any(abs(a - b) > 3 for a, b in zip(got, dim))):
            c.failed.append(f"rank {r} (not in the frame) is dimmed: its params at x {x:.1f} are {dim} "
                            f"within 3 (pixel {p})")
    print(f"browser_check: step dims: {st['title']!r} has ranks {sorted(members)}; {len(pts)} strips "
          f"checked")


def panel_screenshot(c, path):
    panel = c.d.find_element(By.ID, "holdings-panel")
    c.d.execute_script("arguments[0].scrollIntoView({block: 'center'});", panel)
    time.sleep(0.3)
    panel.screenshot(path)
    print(f"browser_check: screenshot {path}")


def check_holdings_unknown(c, url, screenshot):
    c.wait_for("the page is connected (#conn-status 'live')", lambda: c.text("#conn-status") == "live")
    if api_run(url).get("layout", "absent") is not None:
        c.failed.append("/api/run's layout is null")
    c.wait_for(f"the panel says '{UNKNOWN_TEXT}' (#holdings-msg)",
               lambda: c.d.execute_script(
                   "return document.getElementById('holdings-msg').textContent;") == UNKNOWN_TEXT)
    h = c.d.execute_script("return window.shardlab.holdings;") or {}
    if h.get("ranks") != [] or c.d.find_element(By.ID, "holdings-box").is_displayed():
        c.failed.append(f"no strips drawn (window.shardlab.holdings: {h})")
    if screenshot:
        panel_screenshot(c, screenshot)


def set_field(c, css, value):
    box = c.d.find_element(By.CSS_SELECTOR, css)
    box.clear()
    box.send_keys(value)


def check_plan(c, url, token=None):
    """The planner's page: the form and its answer in the table (against /api/plan, asked here
    with the page's own query and, off loopback, the token) and the charts."""
    base = url.rstrip("/") + "/"
    c.d.get(base + "plan")
    if not c.wait_for("the model presets in the form (#plan-model has gpt3-175b)",
                      lambda: c.d.find_elements(By.CSS_SELECTOR,
                                                "#plan-model option[value='gpt3-175b']")):
        return
    Select(c.d.find_element(By.ID, "plan-model")).select_by_value("gpt3-175b")
    Select(c.d.find_element(By.ID, "plan-gpu")).select_by_value("a100-80gb")
    set_field(c, "#plan-gpus", "1024")
    set_field(c, "#plan-batch", "1536")
    c.d.find_element(By.ID, "plan-go").click()
    rows = c.wait_for("layouts in the table (#plan-table data-rows > 0)",
                      lambda: c.int_attr("#plan-table", "data-rows"))
    if not rows:
        return
    query = c.d.execute_script("return location.search;")
    for want in ("model=gpt3-175b", "gpu=a100-80gb", "gpus=1024", "global-batch=1536"):
        if want not in query:
            c.failed.append(f"the page asked for {want} (its query: {query})")
    req = urllib.request.Request(base + "api/plan" + query)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        doc = json.load(r)
    plans = doc["plans"]
    trs = c.d.find_elements(By.CSS_SELECTOR, "#plan-table tbody tr")
    if len(trs) != len(plans):
        c.failed.append(f"{len(plans)} rows in the table as /api/plan has plans (got {len(trs)})")
    heads = [th.text for th in c.d.find_elements(By.CSS_SELECTOR, "#plan-table thead th")]
    cells = [td.text for td in trs[0].find_elements(By.TAG_NAME, "td")] if trs else []
    shown = cells[heads.index("TFLOP/s")] if "TFLOP/s" in heads and cells else None
    want = f"{plans[0]['tflops_per_gpu']:.1f}"
    if shown != want:
        c.failed.append(f"the first row's TFLOP/s is the API's first plan's {want} (shown: {shown})")
    stages = len(plans[0]["stage_gib"])
    if stages != plans[0]["layout"]["pp"]:
        c.failed.append(f"/api/plan gives a memory entry per stage ({stages} for pp "
                        f"{plans[0]['layout']['pp']})")
    c.wait_for(f"one memory bar per pipeline stage (#plan-memory data-stages {stages})",
               lambda: c.int_attr("#plan-memory", "data-stages") == stages)
    c.wait_for("the best layout's reason under the charts (#plan-why)",
               lambda: c.text("#plan-why") == plans[0]["why"])
    c.wait_for("what the estimate leaves out (#plan-left-out)",
               lambda: c.text("#plan-left-out") == doc["left_out"])
    # "Download as job": the selected plan's job file, as /api/plan gives it.
    href = c.d.find_element(By.ID, "plan-job").get_attribute("href") or ""
    prefix = "data:application/json;charset=utf-8,"
    if not href.startswith(prefix):
        c.failed.append(f"#plan-job links the job as a JSON data URL (href: {href[:60]})")
    elif json.loads(urllib.parse.unquote(href[len(prefix):])) != plans[0]["job"]:
        c.failed.append("#plan-job's file is /api/plan's first plan's job")
    name = c.d.find_element(By.ID, "plan-job").get_attribute("download")
    if name != plans[0]["job"]["name"] + ".json":
        c.failed.append(f"#plan-job downloads as {plans[0]['job']['name']}.json (got {name})")
    print(f"browser_check: {rows} layouts, the best {plans[0]['layout']}, {shown} TFLOP/s, "
          f"{stages} stages, job {name}")


def check_plan_error(c):
    """tp 3 does not divide 1024 GPUs: the planner's message on the page's error line."""
    set_field(c, "#plan-form input[name='tp']", "3")
    c.d.find_element(By.ID, "plan-go").click()
    c.wait_for("the planner's message on the error line (#plan-error)",
               lambda: "tp 3 does not divide the 1024 GPUs" in (c.text("#plan-error") or ""))


def screenshot_whole_page(driver, path):
    """The whole page, not only the window: the viewport made as tall as the page first."""
    height = driver.execute_script("return document.documentElement.scrollHeight;")
    width = driver.execute_script("return window.innerWidth;")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": min(4000, max(600, height)), "deviceScaleFactor": 1,
        "mobile": False})
    time.sleep(0.5)
    driver.save_screenshot(path)
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    print(f"browser_check: screenshot {path}")


def console_errors(driver):
    """The browser console's SEVERE messages since the last call."""
    if not hasattr(driver, "get_log"):
        return []
    return [e.get("message", "") for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def frame_times(driver, seconds):
    time.sleep(seconds)
    return driver.execute_script(
        "var s=window.shardlab||{}; return {frames: s.frames, times: s.frameTimes||[]};")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("--straggler", type=int,
                    help="the rank the page must mark as the straggler and name in its diagnosis")
    ap.add_argument("--screenshot")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--plan", action="store_true",
                    help="check the planner's page (URL/plan) instead of the live dashboard")
    ap.add_argument("--holdings", choices=("zero2", "fsdp"),
                    help="check the 'Who holds what' panel of a live run of this strategy")
    ap.add_argument("--step", action="store_true",
                    help="with --holdings: also check the step scrubber over the strips")
    ap.add_argument("--step-screenshot", default="",
                    help="with --step: the panel on the first reduce_scatter frame")
    ap.add_argument("--step-dims", action="store_true",
                    help="a run whose first frame has some ranks (pp 2 x dp 2): the scrubber held "
                         "there dims the others' strips")
    ap.add_argument("--holdings-unknown", action="store_true",
                    help="check that the panel says the layout is unknown (no LAYOUT sent)")
    ap.add_argument("--frame-times", type=float, default=0,
                    help="collect render times for this many seconds and print them as JSON")
    ap.add_argument("--colour", action="append", type=parse_colour, default=[],
                    metavar="MEANING=#rrggbb",
                    help="the desktop app's colour of a meaning: the page must show the same")
    ap.add_argument("--token-file",
                    help="a dashboard off loopback: the page must first send the browser to its "
                         "sign-in page (refused without the token), then go live once the "
                         "token in this file is entered there")
    args = ap.parse_args()
    driver = start_browser()
    try:
        driver.set_page_load_timeout(args.timeout)
        driver.get(args.url)
        token = None
        if args.token_file:
            c = Checks(driver, args.timeout)
            c.wait_for("the sign-in page (no token yet)",
                       lambda: driver.current_url.endswith("/login")
                       and len(driver.find_elements(By.ID, "token")) == 1)
            if c.failed:
                print(f"FAILED: {c.failed[0]} (at {driver.current_url})")
                return 1
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
            box = driver.find_element(By.ID, "token")
            box.send_keys(token)
            box.submit()
        if args.frame_times:
            c = Checks(driver, args.timeout)
            c.wait_for("the page is connected",
                       lambda: c.text("#conn-status") == "live")
            c.wait_for(f"{args.ranks} rank cells",
                       lambda: c.int_attr("#rank-grid", "data-cells") == args.ranks)
            r = frame_times(driver, args.frame_times)
            if args.screenshot:
                driver.save_screenshot(args.screenshot)
            print(json.dumps(r))
            return 0 if not c.failed else 1
        c = Checks(driver, args.timeout)
        if args.holdings:
            check_holdings(c, args.url, args.holdings, args.ranks, args.colour, args.screenshot,
                           args.step_screenshot if args.step else None)
        elif args.step_dims:
            check_step_dims(c, args.url, args.ranks, args.colour)
        elif args.holdings_unknown:
            check_holdings_unknown(c, args.url, args.screenshot)
        elif args.plan:
            check_plan(c, args.url, token)
            check_colours(c, args.colour, PLAN_SHOWN)
            if args.screenshot:
                screenshot_whole_page(driver, args.screenshot)
        else:
            check_page(c, args.ranks, args.replay, args.straggler)
            check_colours(c, args.colour, DASHBOARD_SHOWN, args.straggler)
            if args.screenshot:
                time.sleep(0.5)
                driver.save_screenshot(args.screenshot)
        for e in console_errors(driver):
            c.failed.append(f"browser console error: {e}")
        if args.plan and not c.failed:
            check_plan_error(c)
            # The browser logs the 400 it was just answered; anything else is a failure.
            for e in console_errors(driver):
                if "status of 400" not in e:
                    c.failed.append(f"browser console error: {e}")
        for f in c.failed:
            print(f"FAILED: {f}")
        if not c.failed:
            print(f"browser_check: all checks hold at {args.url}")
        return 1 if c.failed else 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
