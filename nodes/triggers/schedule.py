"""``trigger.schedule``: starts a flow on a timetable, a cron expression
(croniter, imported when first needed) or a fixed interval, in a named time
zone. The run it belongs to serves until it is stopped (Ctrl+C, the
designer's Stop, ``--timeout``) or ``count`` fires have gone out."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta, tzinfo
from typing import Any

from runtime.message import Message, deep_copy, new_msgid
from runtime.node import CUSTOM, Node, NodeConfigError, Param, node

#: The shortest interval accepted: faster than this is a message storm, not
#: a schedule (an Inject node sends bursts, if that is what is wanted).
MIN_INTERVAL = 0.1
#: The longest interval accepted (a year); past it, use a cron expression.
MAX_INTERVAL = 366 * 24 * 3600.0
#: Longest single sleep: the wall clock is looked at again at least this
#: often, so a machine that slept (suspend) or a clock that was set fires at
#: the right wall time, not hours late.
MAX_SLEEP = 30.0
MAX_CRON_CHARS = 200
#: Fire times the designer may ask for at once.
MAX_PREVIEW = 100


@node("trigger.schedule", name="Schedule", category="Triggers", icon="calendar",
      color="#d35400", inputs=())
class Schedule(Node):
    """Sends a message on a timetable: a cron expression (minute hour
    day-of-month month day-of-week, e.g. '0 9 * * 1-5' for 9:00 on weekdays)
    or every interval_seconds. Each message carries fired_at and
    scheduled_for (ISO times in the time zone); the payload is the one set
    here, or {fired_at, scheduled_for} if none is. The node's status shows
    the next fire time."""

    cron = Param(str, "Cron expression: minute hour day-of-month month day-of-week, e.g. "
                 "'*/15 * * * *' (every 15 minutes) or '0 9 * * 1-5' (9:00 Monday to "
                 "Friday); @hourly, @daily, @weekly, @monthly also work. Leave empty to use "
                 "interval_seconds", default="", allow=CUSTOM)
    interval_seconds = Param(float, f"Fire every this many seconds (at least {MIN_INTERVAL:g}) "
                             "instead of a cron expression", optional=True, allow=CUSTOM)
    timezone = Param(str, "Time zone of the cron expression and of the times in the message, "
                     "e.g. Europe/Berlin or UTC; empty: this computer's", default="",
                     allow=CUSTOM)
    payload = Param("json", "The payload of each message; empty: {fired_at, scheduled_for}",
                    optional=True, allow=CUSTOM)
    topic = Param(str, "The topic of each message", default="", allow=CUSTOM, group="advanced")
    fire_at_start = Param(bool, "Also fire once as soon as the run starts", default=False,
                          allow=CUSTOM)
    count = Param(int, "Stop after this many messages; 0: until the run is stopped", default=0,
                  allow=CUSTOM, group="advanced")

    # -- checks and previews (no running node needed) -----------------------------------
    @classmethod
    def check(cls, params):
        try:
            _Timetable.from_params(params)
        except NodeConfigError as exc:
            return [(getattr(exc, "param", "") or "cron", str(exc))]
        count = _value(params, "count")
        if isinstance(count, int) and count < 0:
            return [("count", "count must be 0 (no limit) or more")]
        return []

    @classmethod
    def next_fire_times(cls, params: dict[str, Any], n: int = 5,
                        now: datetime | None = None) -> list[datetime]:
        """The next ``n`` fire times after ``now`` (default: this moment)
        for these settings (ParamValues or plain values), in the schedule's
        time zone. Raises NodeConfigError for bad settings."""
        table = _Timetable.from_params(params)
        start = table.now() if now is None else now
        if start.tzinfo is None:
            start = start.replace(tzinfo=table.tz)
        start = start.astimezone(table.tz)
        out: list[datetime] = []
        t = start
        for _ in range(max(0, min(n, MAX_PREVIEW))):
            t = table.after(t, anchor=start)
            out.append(t)
        return out

    @classmethod
    def param_hint(cls, name: str, params: dict[str, Any]) -> str | None:
        """The designer's line under a param: the next five fire times
        under the param that sets the timetable, or why there are none."""
        cron = _value(params, "cron")
        interval = _value(params, "interval_seconds")
        shown_under = "cron" if (cron or interval is None) else "interval_seconds"
        if name != shown_under:
            return None
        if not cron and interval is None:
            return "Set a cron expression or interval_seconds"
        try:
            times = cls.next_fire_times(params, 5)
        except NodeConfigError as exc:
            return f"⚠ {exc}"
        seconds = any(t.second or t.microsecond for t in times)
        return "Next fire times:\n" + "\n".join(_show(t, seconds) for t in times)

    # -- running ---------------------------------------------------------------------------
    async def generate(self) -> None:
        table = _Timetable.from_params({p: self.param(p).value for p in
                                        ("cron", "interval_seconds", "timezone")})
        limit = int(self.count.get() or 0)
        sent = 0
        started = table.now()
        due = started
        if self.fire_at_start.get():
            self._fire(started, started)
            sent += 1
        while not limit or sent < limit:
            due = table.after(due, anchor=started)
            now = table.now()
            if due <= now:
                # Fires missed while the machine slept or the loop was blocked
                # are skipped, not sent in a burst: the next one is ahead.
                due = table.after(now, anchor=started)
            self.show_status(f"next: {_show(due)}", "blue", "idle")
            await _sleep_until(table, due)
            self._fire(table.now(), due)
            sent += 1
        self.show_status(f"done: {sent} fired", "grey", "done")

    def _fire(self, fired: datetime, scheduled: datetime) -> None:
        times = {"fired_at": fired.isoformat(), "scheduled_for": scheduled.isoformat()}
        payload = self.payload.get()
        if payload is None or payload == "":
            payload = dict(times)
        elif isinstance(payload, (dict, list)):
            payload = deep_copy(payload)
        msg = Message(_msgid=new_msgid(), payload=payload, topic=self.topic.get() or "", **times)
        self.send(msg)


# -- the timetable -------------------------------------------------------------------

class _Problem(NodeConfigError):
    def __init__(self, param: str, text: str) -> None:
        super().__init__(text)
        self.param = param


def _value(params: dict[str, Any], name: str) -> Any:
    """A param's value from the flow's settings (ParamValue objects, or
    their JSON form {"scope": "custom", "value": ...}: only a custom one has
    a value) or from a plain dict of values."""
    v = params.get(name)
    if v is None:
        return None
    if hasattr(v, "scope"):
        return v.value if getattr(v.scope, "value", v.scope) == "custom" else None
    if isinstance(v, dict) and "scope" in v:
        return v.get("value") if v["scope"] == "custom" else None
    return v


class _Timetable:
    """When a schedule fires: ``after(t)`` is the first fire time after t."""

    def __init__(self, tz: tzinfo, cron: str = "", interval: float | None = None) -> None:
        self.tz = tz
        self.cron = cron
        self.interval = interval

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> _Timetable:
        cron = _value(params, "cron")
        interval = _value(params, "interval_seconds")
        tz = _zone(_value(params, "timezone"))
        cron = "" if cron is None else cron
        if not isinstance(cron, str):
            raise _Problem("cron", "cron must be text, e.g. '*/5 * * * *'")
        cron = " ".join(cron.split())
        if cron and interval is not None:
            raise _Problem("interval_seconds", "set either a cron expression or "
                           "interval_seconds, not both")
        if interval is not None:
            if isinstance(interval, bool) or not isinstance(interval, (int, float)):
                raise _Problem("interval_seconds", "interval_seconds must be a number")
            if interval < MIN_INTERVAL:
                raise _Problem("interval_seconds", f"interval_seconds must be at least "
                               f"{MIN_INTERVAL:g} (got {interval:g})")
            if interval > MAX_INTERVAL:
                raise _Problem("interval_seconds", f"interval_seconds must be at most "
                               f"{MAX_INTERVAL:g} (a year); use a cron expression")
            return cls(tz, interval=float(interval))
        if not cron:
            raise _Problem("cron", "set a cron expression (e.g. '0 9 * * 1-5') or "
                           "interval_seconds")
        _check_cron(cron)
        return cls(tz, cron=cron)

    def now(self) -> datetime:
        return datetime.now(self.tz)

    def after(self, t: datetime, anchor: datetime) -> datetime:
        if self.interval is not None:
            # On the grid anchor + k * interval, so that fires do not drift.
            step = self.interval
            k = int((t - anchor).total_seconds() // step) + 1
            nxt = anchor + timedelta(seconds=k * step)
            while nxt <= t:  # float rounding at a grid point
                nxt += timedelta(seconds=step)
            return nxt
        from croniter import croniter

        return croniter(self.cron, t).get_next(datetime)


def _check_cron(cron: str) -> None:
    if len(cron) > MAX_CRON_CHARS:
        raise _Problem("cron", f"cron is {len(cron)} characters; a cron expression has at most "
                       f"{MAX_CRON_CHARS}")
    fields = cron.split()
    if not cron.startswith("@") and len(fields) != 5:
        raise _Problem("cron", f"cron '{cron}' has {len(fields)} fields; it needs 5: minute "
                       "hour day-of-month month day-of-week (e.g. '0 9 * * 1-5'); for seconds "
                       "use interval_seconds")
    try:
        from croniter import croniter
    except ImportError:  # pragma: no cover - a dependency of every install
        raise _Problem("cron", "cron expressions need croniter: pip install croniter") from None
    try:
        it = croniter(cron, datetime(2000, 1, 1))
        it.get_next(datetime)
    except (ValueError, KeyError, TypeError) as exc:
        # croniter's own text quotes the expression; shortened, not repeated.
        reason = str(exc).split("]", 1)[-1].strip(" ,:") or "not a cron expression"
        raise _Problem("cron", f"cron '{cron}' is not valid: {reason}") from None


def _zone(name: Any) -> tzinfo:
    if name is None or name == "":
        return _local_zone()
    if not isinstance(name, str):
        raise _Problem("timezone", "timezone must be a zone name such as Europe/Berlin")
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _Problem("timezone", f"timezone '{name[:80]}' is not a known time zone; use a "
                       "name such as Europe/Berlin, America/New_York or UTC") from None


def _local_zone() -> tzinfo:
    """This computer's zone, with its daylight-saving rules when they can be
    found ($TZ or /etc/localtime), else its current fixed offset."""
    from zoneinfo import ZoneInfo

    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except Exception:  # noqa: BLE001 - a TZ that is no zone name: fall through
            pass
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f, key="localtime")
    except (OSError, ValueError):
        tz = datetime.now().astimezone().tzinfo
        assert tz is not None
        return tz


async def _sleep_until(table: _Timetable, due: datetime) -> None:
    while True:
        left = (due - table.now()).total_seconds()
        if left <= 0:
            return
        await asyncio.sleep(min(left, MAX_SLEEP))


def _show(t: datetime, seconds: bool = True) -> str:
    """A fire time as people read it; milliseconds only when there are some
    (sub-second intervals), seconds only when asked for."""
    ms = f".{t.microsecond // 1000:03d}" if t.microsecond else ""
    clock = t.strftime("%H:%M:%S") + ms if seconds or ms else t.strftime("%H:%M")
    return t.strftime("%a %Y-%m-%d ") + clock + t.strftime(" %Z").rstrip()
