// palisade's portal: the one script, a progressive enhancement. A page whose live region says
// it is moving (`id="live" data-moving="true"`: a workload still deploying, a policy pending)
// is fetched again every quarter second (or every `data-poll` milliseconds) and the region
// swapped in, until the region says it has settled, so statuses, replicas, pods and events
// follow the cluster without a reload. A page reached right after a create or update
// (`data-follow="20"`) is followed for that many seconds whatever it says, since the status
// shown may still be the version before's. Without JavaScript the page is the same, one
// reload at a time.
(function () {
  'use strict';
  var DEFAULT_POLL_MS = 250;
  var GIVE_UP_MS = 10 * 60 * 1000;
  var started = Date.now();
  var first = document.getElementById('live');
  var followUntil = started + 1000 * (first ? parseInt(first.getAttribute('data-follow') || '0', 10) || 0 : 0);

  function region(doc) {
    return doc.getElementById('live');
  }

  function schedule() {
    var live = region(document);
    if (!live) return;
    if (live.getAttribute('data-moving') !== 'true' && Date.now() >= followUntil) return;
    if (Date.now() - started > GIVE_UP_MS) return;
    var poll = parseInt(live.getAttribute('data-poll') || '', 10) || DEFAULT_POLL_MS;
    window.setTimeout(refresh, poll);
  }

  function refresh() {
    fetch(window.location.href, { credentials: 'same-origin', headers: { accept: 'text/html' } })
      .then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.text();
      })
      .then(function (text) {
        var fresh = region(new DOMParser().parseFromString(text, 'text/html'));
        var live = region(document);
        // Not the page any more (e.g. the session ended: the sign-in page): stop here.
        if (!fresh) return;
        if (live) {
          live.setAttribute('data-moving', fresh.getAttribute('data-moving') || 'false');
          live.innerHTML = fresh.innerHTML;
        }
        schedule();
      })
      .catch(function () {
        // Stop quietly: a reload shows the page as it is.
      });
  }

  schedule();
})();
