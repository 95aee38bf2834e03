"""Topic ACLs as MirrorMaker 2 copies them (``MirrorSourceConnector.listTopicAclBindings``,
``shouldReplicateAcl``, ``targetAclBinding``): the source's LITERAL topic ACLs of the mirrored
topics, every binding but ALLOW WRITE (only the mirror writes to a mirrored topic), ALLOW ALL
turned into ALLOW READ, and DENY entries as they are: a DENY left behind would give the target
topic wider access than its source topic has."""

from __future__ import annotations

import logging
from typing import Dict, Iterable, List

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   ResourcePatternType, ResourceType)

from ..clients.admin import REQUEST_TIMEOUT_S

log = logging.getLogger("mirror_maker.replication")

TOPIC_ACLS = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.LITERAL, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)


def target_bindings(source: Iterable[AclBinding], targets: Dict[str, Iterable[str]]) -> List[AclBinding]:
    """The target's bindings for the source's: ``targets`` maps each mirrored source topic to
    its target topics."""
    out = []
    for binding in source:
        allow = binding.permission_type == AclPermissionType.ALLOW
        if allow and binding.operation == AclOperation.WRITE:
            continue
        if binding.resource_pattern_type != ResourcePatternType.LITERAL or binding.name not in targets:
            continue
        operation = AclOperation.READ if allow and binding.operation == AclOperation.ALL else binding.operation
        for topic in sorted(targets[binding.name]):
            out.append(AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, binding.principal,
                                  binding.host, operation, binding.permission_type))
    return out


class TopicAcls:
    def __init__(self, source_admin, target_admin) -> None:
        self._source = source_admin
        self._target = target_admin
        self._synced: set = set()

    def sync(self, targets: Dict[str, Iterable[str]]) -> int:
        """Create the target bindings (again: an ACL deleted on the target comes back, as with
        MirrorMaker 2); how many are new. A source without an authorizer has nothing to copy."""
        try:
            source = self._source.describe_acls(TOPIC_ACLS, request_timeout=REQUEST_TIMEOUT_S).result()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.SECURITY_DISABLED:
                log.debug("the source has no authorizer: no ACLs to copy")
            else:
                log.warning("Cannot read the source's topic ACLs: %s", exc.args[0].str())
            return 0
        bindings = target_bindings(source, targets)
        if not bindings:
            return 0
        created = 0
        for binding, future in self._target.create_acls(bindings, request_timeout=REQUEST_TIMEOUT_S).items():
            try:
                future.result()
            except KafkaException as exc:
                log.warning("Cannot create ACL %s on the target: %s", _describe(binding), exc.args[0].str())
                continue
            if _key(binding) not in self._synced:
                self._synced.add(_key(binding))
                created += 1
                log.info("Copied ACL to the target: %s", _describe(binding))
        return created


def _key(binding: AclBinding):
    return (binding.name, binding.principal, binding.host, binding.operation, binding.permission_type)


def _describe(binding: AclBinding) -> str:
    return (f"{binding.principal} from {binding.host} may {binding.operation.name} topic {binding.name} "
            f"({binding.permission_type.name})")


