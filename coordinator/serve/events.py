"""What the build service tells its listeners: commits and state changes, numbered in order.

The build service publishes from its own thread; the HTTP server's event streams read from
their event loop. ``publish`` hands each event to every subscriber's loop with
``call_soon_threadsafe``, so no listener blocks the service and no thread waits per client.
The newest events are kept (a bounded ring) so a client that reconnects with the id of the
last event it saw (``Last-Event-ID``) gets what it missed, if it is still held.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

KEPT = 1000


@dataclass(frozen=True)
class Event:
    id: int
    kind: str  # "commit" (a dataset has a new head) or "state" (queued, running, failed, idle)
    data: dict[str, Any]


class EventBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._recent: deque[Event] = deque(maxlen=KEPT)
        self._subscribers: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Event | None]]] = set()

    def publish(self, kind: str, data: dict[str, Any]) -> Event:
        with self._lock:
            event = Event(next(self._ids), kind, data)
            self._recent.append(event)
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # that loop is closed: the server is stopping
                pass
        return event

    def close(self) -> None:
        """Ends every subscriber's stream (a None in its queue): the server is stopping."""
        with self._lock:
            subscribers = list(self._subscribers)
        for loop, queue in subscribers:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:
                pass

    def subscribe(self, after: int | None = None) -> tuple[asyncio.Queue[Event | None], list[Event]]:
        """A queue of the events from now on (call from the event loop; None ends it), and
        the kept events after id ``after`` that the subscriber missed."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        with self._lock:
            self._subscribers.add((asyncio.get_running_loop(), queue))
            missed = [e for e in self._recent if after is not None and e.id > after]
        return queue, missed

    def unsubscribe(self, queue: asyncio.Queue[Event | None]) -> None:
        with self._lock:
            self._subscribers = {(lp, q) for lp, q in self._subscribers if q is not queue}
