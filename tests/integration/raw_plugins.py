"""A raw handler (``--use.raw.bytes``) for the tests: loaded by the mirror subprocess."""

from mirror_maker import RawBatchHandler


class ToTheSecondTarget(RawBatchHandler):
    """Declares two target topics per source topic (``<topic>.roomy``, ``<topic>.tight``) and
    sends every batch to the second."""

    def handle_batch(self, batch):
        return f"{batch.topic}.tight"

    def target_topics(self, source_topic):
        return [f"{source_topic}.roomy", f"{source_topic}.tight"]


class Undeclared(RawBatchHandler):
    """Sends every batch to ``<topic>.elsewhere`` but declares only the source topic (the
    default ``target_topics``)."""

    def handle_batch(self, batch):
        return f"{batch.topic}.elsewhere"
