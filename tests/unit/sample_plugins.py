"""Handlers and listeners loaded by dotted path in the plugin tests."""

from mirror_maker import MessageHandler, ProducerRecord, RebalanceListener


class ArgHandler(MessageHandler):
    def __init__(self, args):
        self.args = args

    def handle(self, record):
        return [ProducerRecord(self.args + record.topic, record.value, record.key)]


class InitHandler:
    """The KIP-3 contract: no-argument constructor, then init(args)."""

    def __init__(self):
        self.args = None

    def init(self, args):
        self.args = args

    def handle(self, record):
        return []


class NoArgHandler:
    def handle(self, record):
        return [record]


class NoHandleMethod:
    pass


class RaisingConstructor:
    def __init__(self, args):
        raise ValueError("bad args")


def function_handler(record):
    return []


class ArgListener(RebalanceListener):
    def __init__(self, args):
        self.args = args


class NotAListener:
    pass


class RenamingRawHandler:
    """A raw handler (KIP-712): every batch to ``moved.<topic>``."""

    def handle_batch(self, batch):
        return "moved." + batch.topic
