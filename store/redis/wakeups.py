"""Wake-ups of idle workers over Redis Pub/Sub.

``lua/enqueue.lua`` publishes the queue name of ready jobs on the
deployment's channel (``Keys.wakeup``) in the same script that writes them;
a worker subscribes once and claims as soon as a notice for one of its
queues arrives. Pub/Sub is fire-and-forget: a notice sent while a worker is
reconnecting is lost, which only delays that worker until its next poll.
On Redis Cluster, PUBLISH reaches subscribers on every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.base import Wakeups
from store.redis.connect import unavailable


class RedisWakeups(Wakeups):
    """A subscription of one worker (redis-py PubSub, its own connection)."""

    def __init__(self, client: Any, channel: str, queues: Sequence[str]) -> None:
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._channel = channel
        self._queues = frozenset(queues)
        self._subscribed = False

    def wait(self, timeout_s: float) -> bool:
        with unavailable():
            if not self._subscribed:
                self._pubsub.subscribe(self._channel)  # redis-py re-subscribes after a reconnect
                self._subscribed = True
            message = self._pubsub.get_message(timeout=timeout_s)
            while message is not None:
                if message.get("type") == "message" and message.get("data") in self._queues:
                    return True
                message = self._pubsub.get_message(timeout=0)
        return False

    def close(self) -> None:
        self._pubsub.close()
