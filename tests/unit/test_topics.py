"""Kafka's include-string clean-up, full-match semantics and Java regex translation."""

import pytest

from mirror_maker.errors import ConfigError
from mirror_maker.config import spec
from mirror_maker.config.topics import compile_include, kafka_include_string, select_topics


@pytest.mark.parametrize("raw,expected", [
    (" 'a, b.*' ", "a|b.*"),
    ('"topic"', "topic"),
    ("another_topic,new.*,foo", "another_topic|new.*|foo"),
    ("a b", "ab"),
    ("a\tb", "a\tb"),              # only spaces are removed, as in Kafka
    ("\"'x'\"", "x"),
])
def test_kafka_include_string(raw, expected):
    assert kafka_include_string(raw) == expected


def test_comma_separated_regex_matches_like_kafkas_integration_test():
    pattern = compile_include("another_topic,new.*,foo")
    assert select_topics(pattern, ["new-topic", "foo", "foobar", "x"]) == ["foo", "new-topic"]


def test_full_match_not_search():
    assert select_topics(compile_include("top"), ["top", "topic", "stop"]) == ["top"]


def test_internal_topics_skipped_unless_asked():
    pattern = compile_include(".*")
    topics = ["__consumer_offsets", "__transaction_state", "__mine", "a"]
    assert select_topics(pattern, topics) == ["__mine", "a"]
    assert select_topics(pattern, topics, exclude_internal=False) == sorted(topics)


@pytest.mark.parametrize("java,matches,rejects", [
    ("(?<env>prod|dev)-.*", "prod-x", "test-x"),
    ("\\p{Lower}+", "abc", "aBc"),
    ("\\P{Digit}+", "abc", "a1c"),
    ("a*+b", "aab", "aa"),          # possessive quantifier
    ("orders-(?i)eu", "orders-EU", "ORDERS-eu"),  # a flag group applies from where it stands
    ("(?i)orders", "ORDERS", "orders-x"),
    ("(?iu)caf\u00e9", "CAF\u00c9", "cafe"),
    ("\\Qa.b\\E.*", "a.bc", "axbc"),  # \Q...\E quotes literally
    ("(?<x>a)\\k<x>", "aa", "ab"),
    ("topic\\z", "topic", "topicx"),
])
def test_java_constructs(java, matches, rejects):
    pattern = compile_include(java)
    assert pattern.fullmatch(matches) and not pattern.fullmatch(rejects)


#: What java.util.regex.Pattern answers (JDK 17, Pattern.compile(regex).matcher(text).matches()):
#: possessive quantifiers, atomic groups, nested and intersected classes, a leading ^ negating the
#: whole class (Java 9 on), POSIX classes inside classes.
JAVA_ANSWERS = [
    ('a*+b', 'aab', True),
    ('a*+b', 'aa', False),
    ('a++a', 'aaa', False),
    ('a?+a', 'a', False),
    ('(?>a|ab)c', 'ac', True),
    ('(?>a|ab)c', 'abc', False),
    ('(?>x+)y', 'xxy', True),
    ('x{1,3}+x', 'xxx', False),
    ('[a-z&&[^x]]+', 'abc', True),
    ('[a-z&&[^x]]+', 'axc', False),
    ('[a-c[x-z]]+', 'axz', True),
    ('[a-c[x-z]]+', 'abd', False),
    ('[^a-c[x-z]]', 'd', True),
    ('[^a-c[x-z]]', 'a', False),
    ('[^a-c[x-z]]', 'y', False),
    ('[a-z&&def]+', 'fed', True),
    ('[a-z&&def]+', 'abc', False),
    ('[\\p{Lower}0-9]+', 'a1b', True),
    ('[\\p{Lower}0-9]+', 'aB', False),
    ('[\\P{Digit}&&[a-c]]+', 'abc', True),
    ('[\\P{Digit}&&[a-c]]+', 'ab1', False),
    ('[a-z&&[^aeiou]&&[^x]]+', 'bcd', True),
    ('[a-z&&[^aeiou]&&[^x]]+', 'bxd', False),
    ('[a-z&&[^aeiou]&&[^x]]+', 'bad', False),
    ('[^abc&&[a-z]]', 'd', True),
    ('[^abc&&[a-z]]', '1', True),
    ('[^abc&&[a-z]]', 'a', False),
    ('orders-[0-9&&[^5]]++', 'orders-123', True),
    ('orders-[0-9&&[^5]]++', 'orders-153', False),
    ('[a-f&&[^b-d]&&[\\p{Alpha}]]*', 'aef', True),
    ('[a-f&&[^b-d]&&[\\p{Alpha}]]*', 'aef1', False),
    ('[a&b]+', 'a&b', True),
    ('[a|~]+', '~|a', True),
    ('(?<env>prod|dev)-\\k<env>', 'prod-prod', True),
    ('(?<env>prod|dev)-\\k<env>', 'prod-dev', False),
]


@pytest.mark.parametrize("java,text,matches", JAVA_ANSWERS)
def test_java_regex_features_match_as_java_does(java, text, matches):
    assert bool(compile_include(java).fullmatch(text)) is matches


@pytest.mark.parametrize("bad", ["*", "a(", "\\p{InGreek}", "a(?d)b", "[a-z", "[a-z&&]"])
def test_invalid_regex_is_a_config_error_naming_the_option_and_the_value(bad):
    with pytest.raises(ConfigError) as info:
        compile_include(bad, "--whitelist")
    assert str(info.value).startswith(f"--whitelist '{bad}': ")


def test_an_unclosed_character_class_names_the_option_typed_and_its_value():
    with pytest.raises(ConfigError) as info:
        compile_include("a[b", "--whitelist")
    assert str(info.value) == "--whitelist 'a[b': the regex has an unclosed character class"


@pytest.mark.parametrize("java,text,matches", JAVA_ANSWERS)
def test_mirror_maker_2_regex_lists_mean_what_java_means(java, text, matches):
    """``topics``, ``groups`` and their excludes are Java regexes too, each entry of the list."""
    assert bool(spec.regex_list_pattern(f"other, {java}").fullmatch(text)) is matches


@pytest.mark.parametrize("bad", ["a(", "[a-z&&]", "orders, \\p{InGreek}"])
def test_an_invalid_regex_list_names_itself(bad):
    assert spec.regex_list(bad).startswith(f"{bad} is an invalid regex list: ")


def test_a_regex_list_is_joined_as_mirror_maker_2_joins_it():
    """MirrorMaker 2 compiles String.join("|", entries): an inline flag reaches the entries after
    it, and an entry that only parses wrapped is refused as Java refuses it."""
    pattern = spec.regex_list_pattern("foo, (?i)bar, baz")
    assert pattern.fullmatch("BAZ") and pattern.fullmatch("BAR") and not pattern.fullmatch("FOO")
    assert spec.regex_list("a)|(b") is not None
