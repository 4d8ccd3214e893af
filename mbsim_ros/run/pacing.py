"""Real-time runner: steps a Simulation paced to the wall clock. Imports nothing of ROS.

    runner = Runner(sim, rtf=1.0, on_step=publish_sensors)
    runner.run(duration=10.0)          # or runner.start() and control it from other threads

Pacing. Step k (counted from the current pacing reference) has the wall-clock target

    target_k = ref_wall + k * dt / rtf

and the loop sleeps until the target before stepping. rtf = 0 never sleeps (as fast as possible).
When the loop is behind (a slow step, a stall in on_step, the OS descheduling us) the policy says
what happens, after Choreonoid's two real-time sync modes:

- "compensatory": keep the reference; later steps run without sleeping until the schedule is
  caught up, so the total wall time stays sim time / rtf.
- "conservative": a step that is late by more than one step period (an overrun, below) moves the
  reference forward by its lateness, so the lost time is never caught up. Lateness under one
  period (scheduling noise) is absorbed as in compensatory mode, so noise does not accumulate
  into a slow drift.

Pause, resume, single steps (while paused, unpaced) and reset restart the reference: time spent
paused is never caught up afterwards.

Precise sleeping: time.sleep() overshoots by ~50-100 us on an idle Linux box (more under load),
which is most of a 1 ms step. The wait is therefore hybrid: time.sleep() until `spin` seconds
before the target (default 0.2 ms), then a busy-wait on time.perf_counter() to the target. That
gives a few-microsecond accuracy for the cost of spinning up to `spin` per step (about 20% of a
core at dt = 1 ms); spin=0 sleeps only (cheaper, lateness then includes the sleep overshoot).

Definitions (stats()):
- lateness of a paced step: (wall time the step starts) - (its target), in seconds (>= 0 but for
  clock granularity). Recorded for every paced step (rtf > 0; not for step_once steps) in a
  fixed-size ring buffer (`jitter_window` entries, no per-step allocation): lateness_mean_ms,
  lateness_p50_ms, lateness_p99_ms, lateness_max_ms and lateness_histogram (how many steps were
  late by < 0.1, 0.1-0.5, 0.5-1, 1-2 and >= 2 ms) are over that window, lateness_steps says how
  many steps it holds (the run's paced steps, at most jitter_window). Everything else, overruns
  included, covers the whole run.
- overrun: a paced step whose lateness exceeds one step period of wall time, dt / rtf. While
  compensatory catches up after a stall every step of the catch-up counts; conservative counts
  the one step whose lateness it drops. Never counted at rtf 0.
- dropped_time: the wall seconds of lateness conservative mode gave up (moved the reference by);
  a conservative paced run takes duration / rtf + dropped_time. Always 0 for compensatory.
- rtf: simulated time advanced by the running loop / wall time the loop ran, both excluding
  paused intervals and step_once steps, since run() started. rtf_recent: the same over the last
  ~1 s (sampled every 0.1 s).

Operating system help (opt-in, Linux): realtime_priority N runs the physics thread under
SCHED_FIFO at priority N (1-99), so that ordinary processes no longer preempt it; cpu K pins it
to core K (best on a core isolated from the scheduler, isolcpus= / cpusets, where nothing else
runs). Both need rights the user may not have (CAP_SYS_NICE or an rtprio limit for the
priority): then the run goes on without, and `os_status` says why.

Threads. run() is the physics thread: it steps, calls on_step(sim) after each step (or chunk),
and between steps applies what other threads asked for. pause(), resume(), step_once(), reset(),
submit() and stop() are safe from any thread (ROS service callbacks, DDS listeners); their
requests are applied in the order made, between steps. The hot loop only reads one flag per step
for them. The step kernel releases the GIL, so other Python threads (an AsyncPublisher) run
while it computes; while the loop itself runs Python code (on_step, pacing) a thread that wants
the GIL may wait up to sys.getswitchinterval() (5 ms by default) and vice versa.
"""
from __future__ import annotations

import collections
import gc
import logging
import threading
import time

import numpy as np

POLICIES = ("compensatory", "conservative")

_log = logging.getLogger(__name__)


class _Stop(Exception):
    """Raised inside the control path to leave the loop."""


class Runner:
    """Steps `sim` at its dt, paced to the wall clock (module docstring: pacing, definitions).

    rtf: real-time factor (1.0 real time, 2.0 twice as fast, 0 as fast as possible).
    policy: "compensatory" or "conservative" catch-up when behind.
    on_step: called as on_step(sim) in the physics thread after each step (each chunk).
    chunk: steps per iteration, in one sim.step(chunk) call; pacing, lateness and on_step are
        then per chunk (chunk=1: per step).
    progress: called as progress(counters()) from the physics thread at most every 0.1 s of
        wall time, and once when run() ends (e.g. to update a tqdm bar); counters() is stats()
        without the lateness statistics, whose percentiles over a long window would cost the
        physics thread milliseconds.
    spin: seconds before each target spent busy-waiting instead of sleeping (0: sleep only).
    jitter_window: how many recent lateness samples the statistics cover.
    """

    def __init__(self, sim, rtf: float = 1.0, policy: str = "compensatory", on_step=None,
                 chunk: int = 1, progress=None, spin: float = 2e-4, jitter_window: int = 4096,
                 realtime_priority: int = 0, cpu: int | None = None):
        rtf = float(rtf)
        if not (np.isfinite(rtf) and rtf >= 0):
            raise ValueError(f"rtf must be a real-time factor >= 0 (0: as fast as possible), got {rtf}")
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
        if int(chunk) != chunk or chunk < 1:
            raise ValueError(f"chunk must be a whole number of steps >= 1, got {chunk}")
        if not (spin >= 0):
            raise ValueError(f"spin must be >= 0 seconds, got {spin}")
        if int(jitter_window) < 1:
            raise ValueError(f"jitter_window must be >= 1, got {jitter_window}")
        if int(realtime_priority) != realtime_priority or not 0 <= realtime_priority <= 99:
            raise ValueError(f"realtime_priority must be 0 (off) or a SCHED_FIFO priority 1..99, got {realtime_priority}")
        if cpu is not None and (int(cpu) != cpu or cpu < 0):
            raise ValueError(f"cpu must be a core number >= 0, got {cpu}")
        self.realtime_priority = int(realtime_priority)
        self.cpu = None if cpu is None else int(cpu)
        self.os_status = "normal scheduling"
        self.sim = sim
        self.rtf = rtf
        self.policy = policy
        self.on_step = on_step
        self.chunk = int(chunk)
        self.progress = progress
        self.spin = float(spin)
        self._cv = threading.Condition(threading.RLock())
        self._commands = collections.deque()
        self._dirty = False          # set (under _cv) whenever a request waits for the loop
        self._stop_requested = False
        self._paused = False
        self._parked = False         # the loop is waiting while paused
        self._resumes = 0            # resume() calls (a pause waiter stops waiting at the next)
        self._granted = 0            # step_once steps asked for / done (totals)
        self._granted_done = 0
        self._running = False
        self._thread = None
        self._thread_error = None
        self._physics_ident = None
        self._pace = None            # (wall time of the pacing reference, simulation time there)
        self._lateness = np.zeros(int(jitter_window))
        self._window = np.zeros((11, 2))   # (active wall, paced steps) every 0.1 s: ~1 s window
        self._clear_stats(time.perf_counter())
        self._t_end = self._t_start

    def _clear_stats(self, now):
        self._lateness[:] = 0.0
        self._nlate = 0              # lateness samples recorded (ring index = _nlate % size)
        self._steps = 0              # all steps taken by run() (paced and step_once)
        self._paced_steps = 0
        self._overruns = 0
        self._dropped = 0.0          # wall seconds of lateness conservative mode gave up
        self._t_start = now
        self._paused_wall = 0.0      # wall time spent paused, finished pauses
        self._pause_began = None
        self._t_end = None
        self._nwindow = 0

    # -- requests from any thread ----------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._running

    @property
    def paused(self) -> bool:
        """Whether a pause is in effect (requested); the loop parks at the next step boundary."""
        return self._paused

    @property
    def pacing_reference(self):
        """(wall time (time.perf_counter()), simulation time) the last paced run's schedule
        counts from: the steps after it are due at wall + k dt / rtf. None before a paced run;
        a pause, a reset, a new rtf and conservative catch-up each move it."""
        return self._pace

    def sim_time(self, wall: float | None = None) -> float:
        """The simulation time the pacing schedule assigns to wall-clock instant `wall`
        (time.perf_counter(); default now): ref_t + (wall - ref) * rtf, with the reference of
        the current paced run. Ahead of sim.t while the loop catches up after a stall. Not
        paced (rtf 0, paused, not running): sim.t. Any thread."""
        pace = self._pace
        if pace is None or self.rtf == 0 or self._paused or not self._running:
            return float(self.sim.t)
        if wall is None:
            wall = time.perf_counter()
        return pace[1] + (wall - pace[0]) * self.rtf

    def pause(self, wait: bool = False, timeout: float | None = None) -> bool:
        """Pause at the next step boundary. wait=True blocks until the loop has parked (or is
        not running, or another thread's resume() has overridden this pause before the loop
        parked: the loop would never park for it); returns False if that took longer than
        timeout."""
        with self._cv:
            self._paused = True
            self._dirty = True
            self._cv.notify_all()
            if wait:
                self._check_not_physics_thread("pause(wait=True)")
                resumes = self._resumes
                return self._cv.wait_for(
                    lambda: self._parked or not self._running or self._resumes != resumes, timeout)
        return True

    def resume(self):
        """Resume paced stepping; paused time is not caught up. Cancels unfinished step_once steps."""
        with self._cv:
            self._paused = False
            self._resumes += 1
            self._granted_done = self._granted
            self._dirty = True
            self._cv.notify_all()

    def step_once(self, n: int = 1, wait: bool = False, timeout: float | None = None) -> bool:
        """Pause (if not paused) and do exactly n more steps, unpaced, then stay paused.

        While run() is active the steps are taken by the physics thread; wait=True blocks until
        they are done (False if timeout passed first). When run() is not active the steps are
        taken here, at once, with on_step called as in the loop."""
        n = int(n)
        if n < 0:
            raise ValueError(f"step_once needs n >= 0 steps, got {n}")
        with self._cv:
            self._paused = True
            if not self._running:
                self._step_unpaced(n)
                return True
            self._granted += n
            target = self._granted
            self._dirty = True
            self._cv.notify_all()
            if wait:
                self._check_not_physics_thread("step_once(wait=True)")
                return self._cv.wait_for(
                    lambda: self._granted_done >= target or not self._running, timeout)
        return True

    @staticmethod
    def collect_garbage():
        """After a world change (a model added or removed) during a run, between steps: a full
        collection (~50 ms) and the heap frozen again, since what run() froze is out of the
        collector's reach until the run ends and the change may have left cycles among it.
        Nothing frozen (not running): nothing to do, the collector works as usual."""
        if gc.get_freeze_count():
            gc.unfreeze()
            gc.collect()
            gc.freeze()

    def reset(self):
        """sim.reset() between steps (in order with submit()); the pacing reference restarts.
        Immediate when run() is not active."""
        self.submit(self._do_reset)

    def set_pacing(self, rtf: float | None = None, policy: str | None = None):
        """Change the real-time factor and/or the catch-up policy between steps (checked as the
        constructor checks them, ValueError here); the pacing reference restarts there, so the
        new pace holds from that step on."""
        if rtf is not None:
            rtf = float(rtf)
            if not (np.isfinite(rtf) and rtf >= 0):
                raise ValueError(f"rtf must be a real-time factor >= 0 (0: as fast as possible), got {rtf}")
        if policy is not None and policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")

        def apply():
            if rtf is not None:
                self.rtf = rtf
            if policy is not None:
                self.policy = policy
        apply.repace = True
        self.submit(apply)

    def submit(self, fn):
        """Queue fn() to run in the physics thread between steps, in submission order (e.g. to
        set sim.tau). Never blocks. When run() is not active, fn() runs now, in this thread.
        An exception from fn ends run() and propagates from it."""
        with self._cv:
            if not self._running:
                fn()
                return
            self._commands.append(fn)
            self._dirty = True
            self._cv.notify_all()

    def cancel(self, fn) -> bool:
        """Take back a submitted fn that has not run yet; returns whether it was still queued."""
        with self._cv:
            try:
                self._commands.remove(fn)
            except ValueError:
                return False
            return True

    @property
    def physics_thread(self):
        """The thread id of the running physics loop (None when not running)."""
        return self._physics_ident

    def stop(self):
        """End run() at the next step boundary (also while paused). A stop() made while run()
        is not active makes the next run() return at once."""
        with self._cv:
            self._stop_requested = True
            self._dirty = True
            self._cv.notify_all()

    def _check_not_physics_thread(self, what):
        if threading.get_ident() == self._physics_ident:
            raise RuntimeError(f"{what} from the physics thread (on_step or a submitted "
                               "function) would wait for itself")

    # -- background thread ---------------------------------------------------------------
    def start(self, duration: float | None = None) -> threading.Thread:
        """run(duration) in a new daemon thread; join() waits for it and re-raises its error."""
        with self._cv:
            if self._running or (self._thread is not None and self._thread.is_alive()):
                raise RuntimeError("the runner is already running")
            self._thread_error = None
            started = threading.Event()

            def target():
                try:
                    self.run(duration, _started=started)
                except BaseException as e:   # kept for join(); also logged
                    self._thread_error = e
                    _log.error("runner thread ended with an error: %r", e)
                finally:
                    started.set()
            self._thread = threading.Thread(target=target, name="mbsim-runner", daemon=True)
            self._thread.start()
        started.wait()
        return self._thread

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread start() made; re-raises the error run() ended with. Returns
        whether the thread has ended."""
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        if t.is_alive():
            return False
        err, self._thread_error = self._thread_error, None
        if err is not None:
            raise err
        return True

    # -- the physics loop ----------------------------------------------------------------
    def run(self, duration: float | None = None, _started=None) -> dict:
        """Step until `duration` seconds of simulated time have been stepped by this call
        (None: until stop()). Returns stats() at the end.

        Paced (rtf > 0), a run with a duration returns when the wall clock reaches the end of
        its last step (ref + steps * dt / rtf), so consecutive runs keep the pace and a 10 s
        run takes 10 s. Exceptions from sim.step, on_step or a submitted function end the run
        and propagate."""
        sim = self.sim
        warm_up = getattr(sim, "warm_up", None)
        if warm_up is not None:       # compile before the clock starts: no lateness from compiling
            warm_up()
        # the garbage collector's passes during the run stay short: the garbage of loading and
        # compiling goes now, not in a pass in the physics thread (one such gen-1 pass took
        # 2.4 ms there), and what lives now is frozen out of full passes (44 ms here) until the
        # run ends (frozen just before the loop, whose end unfreezes it); a steady run makes no
        # cyclic garbage of its own
        gc.collect(1)
        dt = float(sim.dt)
        remaining = None if duration is None else max(0, int(round(float(duration) / dt)))
        with self._cv:
            if self._running:
                raise RuntimeError("the runner is already running")
            self._running = True
            self._physics_ident = threading.get_ident()
            self._clear_stats(time.perf_counter())
            self._dirty = True      # first pass through _control: a stop, a pause, commands
        if _started is not None:
            _started.set()
        restore = None
        if self.realtime_priority or self.cpu is not None:
            restore = _os_scheduling()
            self.os_status = apply_os_scheduling(self.realtime_priority, self.cpu)
            if not self.os_status.startswith(("SCHED", "pinned")):
                _log.warning(self.os_status)
        gc.freeze()
        try:
            self._loop(sim, dt, remaining)
        except _Stop:
            pass
        finally:
            gc.unfreeze()
            if restore is not None:       # the calling thread goes back to what it was
                _restore_os_scheduling(restore)
            with self._cv:
                now = time.perf_counter()
                self._end_pause(now)
                self._t_end = now
                self._running = False
                self._parked = False
                self._stop_requested = False
                self._physics_ident = None
                self._cv.notify_all()
        if self.progress is not None:
            self.progress(self.counters())
        return self.stats()

    def _loop(self, sim, dt, remaining):
        perf = time.perf_counter
        sleep = time.sleep
        step = sim.step
        on_step = self.on_step
        progress = self.progress
        chunk = self.chunk
        rtf = self.rtf
        paced = rtf > 0
        period = dt / rtf if paced else 0.0          # wall seconds per step
        conservative = self.policy == "conservative"
        spin = self.spin
        late_buf = self._lateness
        late_size = len(late_buf)
        window = self._window
        nwin = len(window)

        ref = perf()          # pacing reference: wall time of step k = ref + k * period
        self._pace = (ref, sim.t)
        k = 0                 # steps since the reference
        next_tick = ref + 0.1
        window[0] = (0.0, 0)
        self._nwindow = 1
        while True:
            if self._dirty:
                rereference, done = self._control(remaining)
                if remaining is not None:
                    remaining -= done
                if rereference:
                    ref = perf()
                    k = 0
                    self._pace = (ref, sim.t)
                    rtf = self.rtf                        # set_pacing may have changed them
                    paced = rtf > 0
                    period = dt / rtf if paced else 0.0
                    conservative = self.policy == "conservative"
            if remaining is not None:
                if remaining <= 0:
                    if paced:      # end when the wall clock reaches the sim time stepped to
                        end = ref + k * period
                        wait = end - perf()
                        if wait > spin:
                            sleep(wait - spin)
                        while perf() < end:
                            pass
                    return
                n = chunk if chunk <= remaining else remaining
                remaining -= n
            else:
                n = chunk
            now = perf()
            if paced:
                target = ref + k * period
                wait = target - now
                if wait > 0:
                    if wait > spin:
                        sleep(wait - spin)
                    now = perf()
                    while now < target:
                        now = perf()
                late = now - target
                if late > period:
                    self._overruns += 1
                    if conservative:
                        ref += late
                        self._pace = (ref, self._pace[1])
                        self._dropped += late
                late_buf[self._nlate % late_size] = late
                self._nlate += 1
            step(n)
            k += n
            self._steps += n
            self._paced_steps += n
            if on_step is not None:
                on_step(sim)
            if now >= next_tick:
                next_tick = now + 0.1
                i = self._nwindow
                window[i % nwin, 0] = now - self._t_start - self._paused_wall
                window[i % nwin, 1] = self._paced_steps
                self._nwindow = i + 1
                if progress is not None:
                    progress(self.counters())

    def _control(self, remaining):
        """Apply requests between steps; park while paused. Returns (restart the pacing
        reference, steps taken here by step_once)."""
        rereference = False
        done = 0
        cv = self._cv
        while True:
            with cv:
                self._dirty = False
                commands = list(self._commands)
                self._commands.clear()
            for fn in commands:
                if fn == self._do_reset or getattr(fn, "repace", False):
                    rereference = True
                fn()
            with cv:
                if self._stop_requested:
                    raise _Stop
                if not self._paused:
                    if self._pause_began is not None:
                        self._end_pause(time.perf_counter())
                        rereference = True
                    return rereference, done
                if self._pause_began is None:
                    self._pause_began = time.perf_counter()
                rereference = True
                if remaining is not None and done >= remaining:
                    raise _Stop                  # the duration was reached by single steps
                left = self._granted - self._granted_done
                if left <= 0:
                    if not self._dirty:
                        self._parked = True
                        cv.notify_all()
                        while not self._dirty:
                            cv.wait()
                        self._parked = False
                    continue
            n = min(self.chunk, left)
            if remaining is not None:
                n = min(n, remaining - done)
            self.sim.step(n)
            self._steps += n
            done += n
            if self.on_step is not None:
                self.on_step(self.sim)
            with cv:
                self._granted_done = min(self._granted_done + n, self._granted)  # resume() cancels
                cv.notify_all()

    def _end_pause(self, now):
        if self._pause_began is not None:
            self._paused_wall += now - self._pause_began
            self._pause_began = None

    def _step_unpaced(self, n):
        """step_once while run() is not active: here and now."""
        while n > 0:
            m = min(self.chunk, n)
            self.sim.step(m)
            n -= m
            if self.on_step is not None:
                self.on_step(self.sim)

    def _do_reset(self):
        self.sim.reset()

    # -- statistics ------------------------------------------------------------------------
    def lateness(self, last: int | None = None) -> np.ndarray:
        """The lateness (s) of the paced steps the statistics cover (the last `jitter_window`,
        or the last `last` of them), oldest first: a copy."""
        n, ring = self._nlate, self._lateness
        size = min(n, len(ring), len(ring) if last is None else max(int(last), 0))
        end = n % len(ring)
        if size <= end:
            return ring[end - size:end].copy()
        return np.concatenate([ring[len(ring) - (size - end):], ring[:end]])

    def counters(self) -> dict:
        """stats() without the lateness statistics: cheap at any window size."""
        now = self._t_end if self._t_end is not None and not self._running else time.perf_counter()
        paused_wall = self._paused_wall
        if self._pause_began is not None:
            paused_wall += now - self._pause_began
        wall = max(now - self._t_start - paused_wall, 0.0)
        dt = float(self.sim.dt)
        paced_time = self._paced_steps * dt
        rtf = paced_time / wall if wall > 0 else 0.0
        rtf_recent = rtf
        nw = self._nwindow
        if nw >= 2:
            size = len(self._window)
            oldest = self._window[max(nw - size, 0) % size]
            span = wall - oldest[0]
            if span > 0:
                rtf_recent = (self._paced_steps - oldest[1]) * dt / span
        return {
            "steps": self._steps,
            "sim_time": float(self.sim.t),
            "wall_time": wall,
            "paused_time": paused_wall,
            "rtf": rtf,
            "rtf_recent": float(rtf_recent),
            "target_rtf": self.rtf,
            "overruns": self._overruns,
            "dropped_time": self._dropped,
            "paused": self._paused,
            "running": self._running,
        }

    def stats(self, last: int | None = None) -> dict:
        """Counters and timing of the current (or last) run() and the lateness statistics over
        the window (or its last `last` steps); definitions in the module doc."""
        late = self.lateness(last)
        if len(late):
            # everything from one sort (np.percentile and np.histogram cost 5x as much: this
            # runs every second on the publisher thread for /diagnostics, which competes with
            # the physics thread for the GIL)
            late.sort()
            p50, p99 = _percentile(late, 0.5), _percentile(late, 0.99)
            mean, worst = float(late.mean()), float(late[-1])
            hist = np.diff(np.searchsorted(late, LATENESS_BINS))
        else:
            mean = p50 = p99 = worst = 0.0
            hist = np.zeros(len(LATENESS_BINS) - 1, dtype=int)
        return dict(self.counters(),
                    lateness_steps=len(late),
                    lateness_mean_ms=mean * 1e3,
                    lateness_p50_ms=p50 * 1e3,
                    lateness_p99_ms=p99 * 1e3,
                    lateness_max_ms=worst * 1e3,
                    lateness_histogram=" ".join(f"{label}:{n}" for label, n in zip(LATENESS_LABELS, hist)))


LATENESS_BINS = np.array([-np.inf, 1e-4, 5e-4, 1e-3, 2e-3, np.inf])   # s
LATENESS_LABELS = ("<0.1ms", "0.1-0.5ms", "0.5-1ms", "1-2ms", ">=2ms")


def _percentile(ordered, q):
    """The q-quantile (0..1) of the sorted array `ordered`, interpolated linearly between
    neighbours as np.percentile's default method."""
    at = q * (len(ordered) - 1)
    lo = int(at)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (at - lo))


def _os_scheduling():
    import os
    try:
        return os.sched_getscheduler(0), os.sched_getparam(0), os.sched_getaffinity(0)
    except (OSError, AttributeError):
        return None


def _restore_os_scheduling(saved):
    import os
    if saved is None:
        return
    try:
        os.sched_setscheduler(0, saved[0], saved[1])
        os.sched_setaffinity(0, saved[2])
    except OSError as e:
        _log.warning("could not restore the thread's scheduling after the run: %s", e)


def apply_os_scheduling(priority: int = 0, cpu: int | None = None, thread: int = 0) -> str:
    """Put a thread (its native id; 0: the calling one) under SCHED_FIFO at `priority` (0: leave
    it) and/or on core `cpu` (None: leave it). Returns what was done, or why not (no exception:
    the run goes on)."""
    import os
    done = []
    if cpu is not None:
        try:
            os.sched_setaffinity(thread, {cpu})
            done.append(f"pinned to cpu {cpu}")
        except (OSError, AttributeError) as e:
            return (f"cannot pin the physics thread to cpu {cpu} ({e}); "
                    f"this machine has cpus {sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}")
    if priority:
        try:
            os.sched_setscheduler(thread, os.SCHED_FIFO, os.sched_param(priority))
            done.insert(0, f"SCHED_FIFO priority {priority}")
        except PermissionError:
            return (f"real-time priority {priority} not permitted: needs CAP_SYS_NICE (e.g. root) or an rtprio "
                    "limit (/etc/security/limits.conf: '@realtime - rtprio 99'); running at normal priority"
                    + (f", {done[0]}" if done else ""))
        except (OSError, AttributeError) as e:
            return f"real-time priority {priority} not available here ({e}); running at normal priority"
    return ", ".join(done) or "normal scheduling"


class AsyncPublisher:
    """A worker thread that runs submitted jobs (callables that build, serialize and write
    messages) so that publishing never blocks the physics loop.

    submit(job) does not wait for anything but a lock held for a few list operations: the queue
    is bounded (max_queue); when it is full the oldest queued job is dropped and counted in
    `dropped`. A job that raises is counted in `errors`, the first exception is kept in
    `first_error` (and logged), and the worker goes on with the next job.
    """

    def __init__(self, max_queue: int = 64, name: str = "mbsim-publisher"):
        if int(max_queue) < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.max_queue = int(max_queue)
        self._cv = threading.Condition(threading.Lock())
        self._queue = collections.deque()
        self._busy = False
        self._closing = False
        self.submitted = 0
        self.done = 0
        self.dropped = 0
        self.errors = 0
        self.first_error = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, job) -> bool:
        """Queue job() for the worker. Returns False (and counts it dropped) after close()."""
        with self._cv:
            if self._closing:
                self.dropped += 1
                return False
            if len(self._queue) >= self.max_queue:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append(job)
            self.submitted += 1
            self._cv.notify()
        return True

    @property
    def pending(self) -> int:
        return len(self._queue) + self._busy

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has run; False if timeout passed first."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Let the queued jobs run, then end the worker; later submits are dropped. Returns
        whether the worker ended within timeout."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def native_id(self):
        """The worker thread's native (OS) id."""
        return self._thread.native_id

    def stats(self) -> dict:
        return {"submitted": self.submitted, "done": self.done, "dropped": self.dropped,
                "errors": self.errors, "pending": self.pending}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _work(self):
        while True:
            with self._cv:
                while not self._queue and not self._closing:
                    self._cv.wait()
                if not self._queue:
                    return
                job = self._queue.popleft()
                self._busy = True
            failed = None
            try:
                job()
            except Exception as e:   # a failing job must not end the worker
                failed = e
            with self._cv:
                if failed is None:
                    self.done += 1
                else:
                    self.errors += 1
                    if self.first_error is None:
                        self.first_error = failed
                        _log.error("publisher job failed (later failures are only counted): %r",
                                   failed)
                self._busy = False
                self._cv.notify_all()
