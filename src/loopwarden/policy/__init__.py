"""What a run may do, decided by code or by a person, never by the model: the intent a request is
routed to (router.py), the values code fixes (slots.py), the roles a tool allows (permissions.py),
the scope that holds these for the whole run (scope.py), and the human approval a
`requires_approval` call waits for (approval.py). The guard (guard/) decides about loops; this
package decides what is allowed at all."""
