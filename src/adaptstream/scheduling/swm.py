"""Klink's sweeping-watermark (SWM) ingestion estimate for one input stream (Klink Sec. 3.1, Eq. 2-7, Alg. 1).

Epochs: epoch n ends when the n-th SWM is ingested, i.e. when a progress indicator (here: a dataset whose newest
event time, minus the query's watermark delay, reaches the end of the next window) arrives. During an epoch the
estimator collects the network delays of the progress indicators (ingestion time minus generation time) as running
sums, so memory does not depend on the rate; at the epoch's end it keeps only the epoch's mean ``mu_n`` and mean
square ``chi_n`` (Eq. 3-4), for the last ``h`` epochs.

Estimate of the next SWM's ingestion (Eq. 5): ``E[w_{n+1}] = g_n + p + mu`` where ``g_n`` is the generation time of
the last SWM, ``p`` the SWM period (the window slide) and ``mu`` the mean of the last ``h`` epoch means. Spread:
``variance="delay"`` (default) uses the pooled variance of one delay, ``mean(chi) - mu^2``: the next SWM is one
draw of the delay distribution. ``variance="mean"`` is Eq. 6 taken literally, the variance of the mean of the epoch
means, ``sum(chi_i - mu_i^2) / h^2``: far narrower (it shrinks with h). The interval holds a share ``f`` of the
normal distribution (Eq. 7; Alg. 1 uses +-2 sigma for f = 95 %).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

_STD = NormalDist()
MIN_SIGMA = 1e-3  # seconds: a deterministic delay still gets an interval of non-zero width


def z_for(f: float) -> float:
    """Half-width of the central interval holding share ``f`` of a standard normal (1.96 for 95 %)."""
    return _STD.inv_cdf((1.0 + f) / 2.0)


class SwmEstimator:
    """Per input stream: epochs, delay statistics, the estimate of the next SWM, and its measured accuracy."""

    def __init__(
        self,
        period: float,
        lateness: float = 0.0,
        history: int = 400,
        confidence: float = 0.95,
        variance: str = "delay",
    ) -> None:
        if period <= 0:
            msg = f"SWM period must be > 0 seconds, got {period}"
            raise ValueError(msg)
        if variance not in ("delay", "mean"):
            msg = f"variance must be 'delay' or 'mean', got {variance!r}"
            raise ValueError(msg)
        self.period = float(period)
        self.lateness = float(lateness)
        self.history = int(history)
        self.z = z_for(confidence)
        self.variance = variance
        self.epochs: deque[tuple[float, float]] = deque(maxlen=self.history)  # (mu_n, chi_n)
        self.origin: float | None = None  # wall time of event time 0 (deadlines are origin + lateness + j * p)
        self.next_deadline: float | None = None
        self.last_gen: float | None = None  # generation time of the last SWM (g_n)
        self.cur = [0, 0.0, 0.0]  # delays of the running epoch: count, sum, sum of squares
        self.pending: list[tuple[int, float, float]] = []  # SWMs ingested, not yet processed: (seq, ingest, deadline)
        self.prediction: tuple[float, float, float] | None = None  # (E, lo, hi) for the next SWM
        self.hits = 0
        self.checked = 0

    # -- observations ------------------------------------------------------------------------------------------
    def observe(
        self,
        seq: int,
        arrival: float,
        event_wall: float,
        origin: float,
        n: int = 1,
        total: float | None = None,
        squares: float | None = None,
    ) -> bool:
        """A progress indicator arrived: dataset ``seq`` at wall time ``arrival`` whose newest event was generated
        at ``event_wall``; its events' delays are ``n`` samples with this sum and sum of squares (default: the
        single delay ``arrival - event_wall``). Returns True when it was an SWM."""
        if self.origin != origin:
            self.origin = float(origin)
            self.next_deadline = None
        if total is None or squares is None:
            d = max(arrival - event_wall, 0.0)
            n, total, squares = 1, d, d * d
        self.cur[0] += int(n)
        self.cur[1] += float(total)
        self.cur[2] += float(squares)
        if self.next_deadline is None:
            self.next_deadline = self._deadline_after(event_wall)
            return False
        if event_wall < self.next_deadline:
            return False
        # the SWM: close the epoch, check the prediction made at its start, predict the next one
        if self.prediction is not None:
            _, lo, hi = self.prediction
            self.checked += 1
            self.hits += int(lo <= arrival <= hi)
        cnt, s, ss = self.cur
        if cnt > 0:  # 9 significant digits: a snapshot restores exactly what the running estimator holds
            self.epochs.append((float(f"{s / cnt:.9g}"), float(f"{ss / cnt:.9g}")))
        self.cur = [0, 0.0, 0.0]
        self.pending.append((int(seq), float(arrival), float(self.next_deadline)))
        del self.pending[:-8]  # bounded: at most a few SWMs wait for one batch
        self.last_gen = float(event_wall)
        self.next_deadline = self._deadline_after(event_wall)
        self.prediction = self._predict()
        return True

    def processed(self, end_seq: int) -> list[tuple[int, float, float]]:
        """A batch ending before manifest position ``end_seq`` completed: the SWMs it carried are processed."""
        done = [p for p in self.pending if p[0] < end_seq]
        self.pending = [p for p in self.pending if p[0] >= end_seq]
        return done

    def _deadline_after(self, event_wall: float) -> float:
        base = float(self.origin or 0.0) + self.lateness
        j = math.floor((event_wall - base) / self.period) + 1
        return base + j * self.period

    # -- estimates ---------------------------------------------------------------------------------------------
    def moments(self) -> tuple[float, float] | None:
        """(mean delay mu, sigma of the next SWM's ingestion) over the last h epochs; None before the first
        epoch ended. One epoch is enough: sigma pools the delays inside the epochs, so a 10 s window is estimated
        from its first SWM on, not only from its second (short runs would otherwise barely use the estimate)."""
        if not self.epochs:
            return None
        h = len(self.epochs)
        mu = sum(m for m, _ in self.epochs) / h
        chi = sum(c for _, c in self.epochs) / h
        # "mean" is Eq. 6 taken literally: the variance of the mean of h epoch means
        var = chi - mu * mu if self.variance == "delay" else sum(c - m * m for m, c in self.epochs) / (h * h)
        return mu, max(math.sqrt(max(var, 0.0)), MIN_SIGMA)

    def _predict(self) -> tuple[float, float, float] | None:
        m = self.moments()
        if m is None or self.last_gen is None:
            return None
        mu, sigma = m
        e = self.last_gen + self.period + mu
        return e, e - self.z * sigma, e + self.z * sigma

    def interval(self) -> tuple[float, float, float, float] | None:
        """(E[w], sigma, t_min, t_max) of the next SWM, or None without enough history."""
        if self.prediction is None:
            return None
        m = self.moments()
        sigma = m[1] if m else MIN_SIGMA
        e, lo, hi = self.prediction
        return e, sigma, lo, hi

    def expected_wait(self, t: float) -> float | None:
        """E[w - t | w > t]: how long the next SWM, not ingested by ``t``, is still expected to take (klink's
        ``straddle``); None without an estimate or once ``t`` is past the interval (the estimate was wrong)."""
        iv = self.interval()
        if iv is None or t >= iv[3]:
            return None
        e, sigma, _, _ = iv
        alpha = (t - e) / sigma  # below z: the tail 1 - cdf(alpha) is at least (1 - f) / 2
        return (e - t) + sigma * _STD.pdf(alpha) / (1.0 - _STD.cdf(alpha))

    def slack(self, t: float, cost: float, cycle: float, overdue: str = "overrun") -> float:
        """Expected slack at time ``t`` with processing cost ``cost`` (Eq. 8-10, Alg. 1). An SWM already ingested
        and not yet processed has its deadline behind it: slack ``(w - t) - cost`` (negative). Past the interval
        with no SWM yet: ``overdue="overrun"`` counts the overrun, ``(t_max - t) - cost``; ``"zero"`` is Alg. 1's
        0 (its loop has no step left), which keeps an SWM that is late behind those already ingested. None-like
        +inf when nothing is known yet."""
        if self.pending:
            return (self.pending[0][1] - t) - cost
        iv = self.interval()
        if iv is None:
            return math.inf
        e, sigma, lo, hi = iv
        if t > hi:  # overdue beyond the interval: count the overrun (our extension) or Alg. 1's 0
            return 0.0 if overdue == "zero" else (hi - t) - cost
        dist = NormalDist(e, sigma)
        p_after = max(1.0 - dist.cdf(t), 1e-12)
        sl, x = 0.0, max(t, lo)
        while x <= hi:
            pr = (dist.cdf(x + cycle) - dist.cdf(x)) / p_after
            sl += pr * ((x + cycle - t) - cost)
            x += cycle
        return sl

    def next_deadline_time(self) -> float | None:
        """When the next window closes: the ingestion of a pending SWM, else the next deadline (wall time)."""
        if self.pending:
            return self.pending[0][2]
        return self.next_deadline

    # -- snapshot ----------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "epochs": [list(e) for e in self.epochs],
            "origin": self.origin,
            "next": self.next_deadline,
            "last_gen": self.last_gen,
            "cur": list(self.cur),
            "pending": [list(p) for p in self.pending],
            "prediction": list(self.prediction) if self.prediction else None,
            "hits": self.hits,
            "checked": self.checked,
        }

    def load(self, s: Mapping[str, Any]) -> None:
        self.epochs = deque((tuple(e) for e in s["epochs"]), maxlen=self.history)
        self.origin, self.next_deadline, self.last_gen = s["origin"], s["next"], s["last_gen"]
        self.cur = [int(s["cur"][0]), float(s["cur"][1]), float(s["cur"][2])]
        self.pending = [(int(a), float(b), float(c)) for a, b, c in s["pending"]]
        self.prediction = tuple(s["prediction"]) if s["prediction"] else None
        self.hits, self.checked = int(s["hits"]), int(s["checked"])
