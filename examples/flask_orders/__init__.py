"""A Flask-SQLAlchemy shop that saves an order and enqueues its invoice in one
transaction, with Leasehold's console at ``/ops`` behind the shop's own login
(see README.md beside this file)."""
