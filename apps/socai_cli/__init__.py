"""The ``socai`` command and the local stack.

The top layer: it may import the three services (``socai up`` runs them, ``socai migrate``
applies their migrations, their subcommands plug in here); nothing imports it but tests.

    main.py        the ``socai`` command (``socai = socai_cli.main:main``)
    stack.py       bring NATS, PostgreSQL, the migrations and the services up and down
    embedded.py    nats-server and PostgreSQL from their PyPI wheels, under var/
    migrations.py  every service's Alembic migrations, by service name
    demo.py        ``socai demo``, the main job behind ``make run``
"""
