"""The page's browser test, driven by infra/browser-test.sh (read that first: it starts the
runner and passes its address, a token and the runner's log).

In headless Chromium, through its WebDriver: open the page with the token in the fragment, add
two photos, move the second before the first, save the offer, reload, and find the saved order;
then, in a fresh page, add the first photo again and find it marked known without having been
sent (the runner's request log has exactly two uploads); save the offer with that one photo, and
browse the stored images: the other one is now the only orphan. Then add two copies of one
picture (different bytes: one stored sideways with an EXIF orientation), browse, and ask for
one copy's near-duplicates: the other copy is listed, and nothing else; an unrelated photo has
none. A screenshot of the reloaded offer is kept, one of the stored images and one of a
near-duplicate listed. Every wait is
for a condition on the DOM, with a deadline.
"""

import argparse
import json
import os
import shutil
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

OFFER = "browser-car"
DEADLINE_S = 30


def installed(*names):
    """The path of the first of `names` on PATH; fails naming them."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    sys.exit(f"browser test: none of {', '.join(names)} is installed (infra/setup.sh tests)")


def browser():
    # Selenium Manager would look for drivers on the network: the system's are used instead.
    os.environ["SE_OFFLINE"] = "true"
    options = Options()
    options.binary_location = installed("chromium", "chromium-browser")
    for flag in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        # This machine's network is closed: Chromium's own background calls would only fail.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1100,900",
    ]:
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(installed("chromedriver")))


def wait_for(driver, what, condition):
    """Waits until `condition(driver)` is truthy and returns it; fails saying `what`."""
    try:
        return WebDriverWait(driver, DEADLINE_S, poll_frequency=0.1).until(condition)
    except TimeoutException:
        status = driver.find_element(By.ID, "offer-status").text
        sys.exit(f"browser test: timed out waiting for {what}; photos {photos(driver)}; status {status!r}")


# The page re-renders its list as photos change: the list is read in one script, never
# element by element (an element read a moment later may have been replaced).
# Whether an item's preview has its placeholder (the photo's ThumbHash, drawn as a PNG) painted
# behind it.
PAINTED = """const painted = (li) => {
    const img = li.querySelector('img');
    return img !== null && img.style.backgroundImage.startsWith('url("data:image/png;base64,');
};"""
SNAPSHOT = PAINTED + """return Array.from(document.querySelectorAll('#photos li'),
    li => [li.dataset.imageId || null, li.dataset.state, li.querySelector('img') !== null,
           painted(li)]);"""


def photos(driver):
    """The photo list: (image id, state, has a preview, has a placeholder) per photo, in order."""
    return [tuple(p) for p in driver.execute_script(SNAPSHOT)]


def settled(driver, count, states):
    """The photo list once it has `count` photos, each in one of `states` with its preview."""
    now = photos(driver)
    if len(now) == count and all(state in states and preview for _, state, preview, _ in now):
        return now
    return None


BROWSED = PAINTED + """return Array.from(document.querySelectorAll('#images > li'),
    li => [li.dataset.imageId, li.dataset.offers, li.querySelector('img') !== null,
           painted(li)]);"""


def browse(driver, orphans):
    """Browses the stored images (or only the orphans): (image id, offers, has a preview) each."""
    box = driver.find_element(By.ID, "orphans-only")
    if box.is_selected() != orphans:
        box.click()
    before = driver.find_element(By.ID, "images-status").text
    driver.find_element(By.ID, "browse-images").click()
    what = "Orphans" if orphans else "Images"
    wait_for(
        driver,
        f"{what.lower()} to be listed",
        lambda d: (text := d.find_element(By.ID, "images-status").text) != before
        and text.startswith(f"{what}: ")
        and text.endswith("."),
    )
    return sorted(tuple(i) for i in driver.execute_script(BROWSED))


def near_duplicates(driver, image_id):
    """Asks for a stored image's near-duplicates: (status text, [(image id, distance)])."""
    item = f"#images > li[data-image-id='{image_id}']"
    driver.find_element(By.CSS_SELECTOR, f"{item} button[data-similar]").click()
    status = wait_for(
        driver,
        f"the near-duplicates of {image_id}",
        lambda d: d.find_element(By.CSS_SELECTOR, f"{item} .similar-status").text,
    )
    listed = driver.execute_script(
        f"""return Array.from(document.querySelectorAll("{item} ul.similar li"),
            li => [li.dataset.imageId, Number(li.dataset.distance)]);"""
    )
    return status, [tuple(m) for m in listed]


def uploads_logged(log):
    """How many `POST /v1/images` requests the runner finished (its JSON request log)."""
    count = 0
    with open(log) as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            span = event.get("span") or {}
            if (
                event.get("fields", {}).get("message") == "request finished"
                and span.get("method") == "POST"
                and span.get("path") == "/v1/images"
            ):
                count += 1
    return count


def check(condition, message):
    if not condition:
        sys.exit(f"browser test: {message}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--near-pair", nargs=2, required=True,
                        help="two files of one picture (the runner indexes near-duplicates)")
    parser.add_argument("photos", nargs=2)
    args = parser.parse_args()
    files = [os.path.abspath(p) for p in args.photos]
    pair = [os.path.abspath(p) for p in args.near_pair]

    driver = browser()
    try:
        driver.get(f"{args.base}/#token={args.token}")
        identity = wait_for(
            driver,
            "the token to be read",
            lambda d: "browser-test" in d.find_element(By.ID, "identity").text
            and d.find_element(By.ID, "identity").text,
        )
        check("#token" not in driver.current_url, "the token stayed in the address bar")
        print(f"browser test: {identity}")

        driver.find_element(By.ID, "offer-id").send_keys(OFFER)
        driver.find_element(By.ID, "files").send_keys("\n".join(files))
        uploaded = wait_for(
            driver, "two uploaded previews", lambda d: settled(d, 2, {"uploaded"})
        )
        first, second = uploaded[0][0], uploaded[1][0]
        check(first and second and first != second, f"two distinct image ids: {uploaded}")
        check(all(p[3] for p in uploaded), f"an upload's placeholder is not painted: {uploaded}")

        driver.find_element(By.CSS_SELECTOR, "button[aria-label='Move photo 2 left']").click()
        check([p[0] for p in photos(driver)] == [second, first], "the photos were not reordered")
        driver.find_element(By.ID, "save-offer").click()
        wait_for(
            driver,
            "the offer to be saved",
            lambda d: "Saved 2 photos" in d.find_element(By.ID, "offer-status").text,
        )
        check(f"offer={OFFER}" in driver.current_url, "the saved offer is not in the URL")

        driver.refresh()
        reloaded = wait_for(driver, "the saved offer", lambda d: settled(d, 2, {"linked"}))
        check(
            [p[0] for p in reloaded] == [second, first],
            f"the order was not kept: {reloaded}, saved {[second, first]}",
        )
        check(all(p[3] for p in reloaded), f"an offer photo's placeholder is not painted: {reloaded}")
        driver.save_screenshot(args.screenshot)
        print(f"browser test: order kept after a reload; screenshot {args.screenshot}")

        # A fresh page (the token is kept for the tab): the stored photo is known, not sent.
        driver.get(f"{args.base}/")
        driver.find_element(By.ID, "files").send_keys(files[0])
        known = wait_for(driver, "the photo to be known", lambda d: settled(d, 1, {"known"}))
        check(known[0][0] == first, f"a different image: {known}")
        sent = uploads_logged(args.log)
        check(sent == 2, f"the page sent {sent} uploads; a known photo must not be sent")
        # Known only if the page sent the photo's SHA-256 (WebCrypto) beside its MD5.
        print("browser test: a stored photo was known from its hashes and not sent again")

        # Saving the offer with only that photo leaves the other one linked by nothing.
        driver.find_element(By.ID, "offer-id").send_keys(OFFER)
        driver.find_element(By.ID, "save-offer").click()
        wait_for(
            driver,
            "the offer to be saved with one photo",
            lambda d: "Saved 1 photo to" in d.find_element(By.ID, "offer-status").text,
        )
        orphans = browse(driver, orphans=True)
        check(orphans == [(second, "0", True, True)], f"the orphans: {orphans}, expected {second}")
        everything = browse(driver, orphans=False)
        expected = sorted([(first, "1", True, True), (second, "0", True, True)])
        check(everything == expected, f"the stored images: {everything}, expected {expected}")
        images_shot = args.screenshot.removesuffix(".png") + "-images.png"
        driver.execute_script("document.getElementById('images-heading').scrollIntoView()")
        driver.save_screenshot(images_shot)
        print(f"browser test: browsing finds both images, the unlinked one the orphan; {images_shot}")

        # Two copies of one picture, different bytes: each is a new image, and each the
        # other's near-duplicate (PDQ within 31 bits); the unrelated photos are not.
        driver.get(f"{args.base}/")
        driver.find_element(By.ID, "files").send_keys("\n".join(pair))
        copies = wait_for(driver, "the two copies uploaded", lambda d: settled(d, 2, {"uploaded"}))
        copy, other_copy = copies[0][0], copies[1][0]
        check(copy != other_copy, f"the copies got one image id: {copies}")
        browse(driver, orphans=False)
        status, listed = near_duplicates(driver, copy)
        check(
            [m[0] for m in listed] == [other_copy] and 0 <= listed[0][1] <= 31,
            f"the near-duplicates of {copy}: {listed} ({status!r}), expected only {other_copy}",
        )
        check(status.startswith("1 near-duplicate"), f"the near-duplicates' status: {status!r}")
        distance = listed[0][1]
        status, listed = near_duplicates(driver, first)
        check(listed == [] and status == "No near-duplicates.",
              f"an unrelated photo's near-duplicates: {listed} ({status!r})")
        similar_shot = args.screenshot.removesuffix(".png") + "-similar.png"
        driver.execute_script("document.getElementById('images-heading').scrollIntoView()")
        driver.save_screenshot(similar_shot)
        print(f"browser test: one picture's two copies are each other's near-duplicates "
              f"({distance} bits), an unrelated photo has none; {similar_shot}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
