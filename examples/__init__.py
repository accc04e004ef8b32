"""Small applications that use Leasehold as a user would; tests/examples/ runs them."""
