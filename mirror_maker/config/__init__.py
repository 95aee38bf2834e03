"""From the user's files and options to one frozen ``MirrorMakerConfig``, before anything connects.

``properties`` reads Java properties files, ``translate`` maps Java client settings to librdkafka's,
``stores`` turns JKS/PKCS12 stores into PEM files, ``client_conf`` applies MirrorMaker's defaults and
lets librdkafka check every value, ``topics`` compiles the include string as Kafka does, and
``mirror_config`` puts it all together; ``spec`` declares every option and mm2.properties setting
once (the defaults, validators and rules everything else takes), ``replication`` holds MirrorMaker
2's options; ``providers`` resolves Kafka's config providers, ``java_options`` reads the JAAS file
``KAFKA_OPTS`` names, ``oauthbearer`` maps OAUTHBEARER logins. Imports only ``errors``, ``extras``
and ``redaction`` (where it registers every secret it reads) from the rest of the package.
"""
