"""A stand-in for the raw path's ``Cluster`` in unit tests: one broker leading every partition,
always ready; what it is sent waits until the test answers it (the raw fetcher's and producer's
tests script their answers on top of it)."""


class ScriptedBroker:
    bootstrap = "scripted:9092"

    def __init__(self) -> None:
        self.refreshes = 0

    def track(self, topics) -> None:
        pass

    def route(self, topic, partition) -> int:
        return 1

    def ready(self, node) -> bool:
        return True

    def refresh(self) -> None:
        self.refreshes += 1
