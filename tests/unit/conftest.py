import pytest


@pytest.fixture
def props(tmp_path):
    """Write a Java properties file and return its path."""
    def write(text: str, name: str = "client.properties"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return write


@pytest.fixture
def good_files(props):
    consumer = props("bootstrap.servers=127.0.0.1:1\ngroup.id=g\n", "consumer.properties")
    producer = props("bootstrap.servers=127.0.0.1:2\n", "producer.properties")
    return consumer, producer
