"""Loading handlers and listeners by dotted path, with Kafka's and KIP-3's constructor contracts."""

import pytest

from mirror_maker.errors import PluginLoadError
from mirror_maker.handlers import FunctionHandler
from mirror_maker.plugins import load_handler, load_listener

P = "tests.unit.sample_plugins"


@pytest.mark.parametrize("path", [f"{P}.ArgHandler", f"{P}:ArgHandler"])
def test_handler_gets_the_args_string_unsplit(path):
    handler = load_handler(path, "a, b  c")
    assert handler.args == "a, b  c"


def test_kip3_init_contract():
    assert load_handler(f"{P}.InitHandler", "x y").args == "x y"


def test_no_args_uses_the_no_argument_constructor():
    assert load_handler(f"{P}.NoArgHandler") is not None


def test_plain_function_is_a_handler():
    assert isinstance(load_handler(f"{P}.function_handler"), FunctionHandler)


@pytest.mark.parametrize("path,args,message", [
    ("no.such.module.Handler", None, "cannot load"),
    (f"{P}.Missing", None, "cannot load"),
    (f"{P}.NoHandleMethod", None, "has no handle(record) method"),
    (f"{P}.RaisingConstructor", "x", "ValueError: bad args"),
    (f"{P}.NoArgHandler", "x", "takes neither one string argument"),
    (f"{P}.function_handler", "x", "needs a class"),
    ("org.apache.kafka.MyHandler", None, "Python class"),
])
def test_handler_errors_are_one_line(path, args, message):
    with pytest.raises(PluginLoadError) as info:
        load_handler(path, args)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_listener_with_args():
    assert load_listener(f"{P}.ArgListener", "q").args == "q"


def test_object_without_callbacks_is_not_a_listener():
    with pytest.raises(PluginLoadError, match="has none of"):
        load_listener(f"{P}.NotAListener")
