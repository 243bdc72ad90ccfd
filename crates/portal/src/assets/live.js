// palisade's portal: the one script, a progressive enhancement. A page whose live region says
// it is moving (`id="live" data-moving="true"`: a workload still deploying, a policy pending)
// is followed until the region says it has settled, so statuses, replicas, pods and events
// follow the cluster without a reload. A page reached right after a create or update
// (`data-follow="20"`) is followed for that many seconds whatever it says, since the status
// shown may still be the version before's. Without JavaScript the page is the same, one
// reload at a time.
//
// A region that names where it is read alone (`data-live`, a resource page) asks for it with
// the status it shows (`data-status`); the server answers the moment that status changes, or
// after a second, so the page learns Kubernetes' verdict as soon as palisade records it.
// Other regions (the boundary page) are read with the whole page every `data-poll`
// milliseconds (a quarter second by default).
(function () {
  'use strict';
  var DEFAULT_POLL_MS = 250;
  // Between two reads of a region that answered at once (a change, or a server that does not
  // wait), so that a page never asks faster than this.
  var MIN_GAP_MS = 200;
  var GIVE_UP_MS = 10 * 60 * 1000;
  var started = Date.now();
  var first = document.getElementById('live');
  var followUntil = started + 1000 * (first ? parseInt(first.getAttribute('data-follow') || '0', 10) || 0 : 0);

  function region(doc) {
    return doc.getElementById('live');
  }

  function following(live) {
    if (!live) return false;
    if (live.getAttribute('data-moving') !== 'true' && Date.now() >= followUntil) return false;
    return Date.now() - started <= GIVE_UP_MS;
  }

  function schedule(delay) {
    var live = region(document);
    if (!following(live)) return;
    if (live.getAttribute('data-live')) {
      window.setTimeout(read, delay);
    } else {
      var poll = parseInt(live.getAttribute('data-poll') || '', 10) || DEFAULT_POLL_MS;
      window.setTimeout(read, poll);
    }
  }

  function read() {
    var live = region(document);
    if (!live) return;
    var alone = live.getAttribute('data-live');
    var url = alone
      ? alone + '?status=' + encodeURIComponent(live.getAttribute('data-status') || '')
      : window.location.href;
    var asked = Date.now();
    fetch(url, { credentials: 'same-origin', headers: { accept: 'text/html' } })
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
          live.setAttribute('data-status', fresh.getAttribute('data-status') || '');
          live.innerHTML = fresh.innerHTML;
        }
        schedule(Math.max(0, MIN_GAP_MS - (Date.now() - asked)));
      })
      .catch(function () {
        // Stop quietly: a reload shows the page as it is.
      });
  }

  schedule(0);
})();
